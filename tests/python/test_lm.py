"""examples/jax/lm, the decoder-only LM, on a small configuration against jax.jit on CPU (the
oracle, in the same run): the first losses of the spmd (4 devices, batch split), megatron
(2x2 data x model) and pipeline (2 stages, one on each island, of 1 and of 2 devices) layouts
equal the jax.jit run's within 1e-4 relative; the pipeline's gradients equal jax.grad of the
unpipelined model's, with one all-reduce per parameter a step whatever the micro-batches;
and a run with --elastic whose executor is SIGKILLed mid-run resumes by itself from
its last checkpoint, with later losses equal to an uninterrupted run's."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import signal
from typing import Any, Dict, List

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from conftest import SOURCE_DIR, Cluster  # noqa: E402

pytest.importorskip("optax")
LM = SOURCE_DIR / "examples" / "jax" / "lm"
if not (pathlib.Path("/usr/share/games/fortunes") / "fortunes").exists():
    pytest.skip("Debian's fortunes package is not installed (scripts/setup.sh installs it)",
                allow_module_level=True)


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"lm_{name}", LM / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = load("train")  # puts examples/jax/lm on sys.path: model, data, layouts are its own
import data  # noqa: E402
import layouts  # noqa: E402
import model  # noqa: E402

SMALL = ["--layers", "2", "--d-model", "32", "--heads", "4", "--context", "16", "--batch", "8",
         "--warmup", "3", "--eval-batches", "1", "--quiet"]
STEPS = 20  # the first 20 losses of each layout against jax.jit


@pytest.fixture(scope="module")
def jit_losses() -> List[float]:
    return train.main(["--layout", "jit", "--steps", str(STEPS)] + SMALL)["losses"]


@pytest.mark.parametrize("layout", [
    ["--layout", "spmd", "--devices", "4"],
    ["--layout", "megatron"],
    ["--layout", "pipeline", "--stages", "2", "--micro", "2", "--islands", "2"],
    ["--layout", "pipeline", "--stages", "2", "--micro", "2", "--islands", "2",
     "--stage-devices", "2"],
], ids=["spmd", "megatron", "pipeline", "pipeline_2_devices_a_stage"])
def test_layouts_train_as_jax_jit(client, jit_losses: List[float], layout: List[str]) -> None:
    got = train.main(layout + ["--steps", str(STEPS)] + SMALL, client=client)
    assert len(got["losses"]) == STEPS
    assert jit_losses[-1] < jit_losses[0], "the oracle did not learn: a test of nothing"
    np.testing.assert_allclose(got["losses"], jit_losses, rtol=1e-4, err_msg=layout[1])


@pytest.mark.parametrize("stage_devices", [1, 2])
def test_pipeline_gradients_equal_the_unpipelined_models(client, stage_devices: int) -> None:
    """Each stage's gradient summed per device over the micro-batches and all-reduced once a
    step: the step's program holds one all-reduce per parameter of a stage of 2 devices (and
    one of the loss), whatever M, and none on stages of 1 device."""
    args = train.parse(["--layout", "pipeline"] + SMALL)
    cfg = train.config(args)
    params = model.init(cfg)
    tokens, targets = data.batch(data.corpus()[0], 3, cfg.batch, cfg.context)
    want_loss, want = jax.jit(jax.value_and_grad(model.loss))(params, tokens, targets)
    stage_leaves = sum(len(jax.tree_util.tree_leaves(p)) for p in model.stages(params, 2))
    for micro in (2, 4):
        pipeline = layouts.Pipeline(cfg, client, stages=2, micro=micro, islands=2,
                                    stage_devices=stage_devices)
        assert [m.island for m in pipeline.meshes] == ["island0", "island1"]
        grads, loss = pipeline.grads(params, tokens, targets)
        np.testing.assert_allclose(loss, float(want_loss), rtol=1e-5)
        flat_got, tree_got = jax.tree_util.tree_flatten(grads)
        assert tree_got == jax.tree_util.tree_structure(want)
        for (path, w), g in zip(jax.tree_util.tree_flatten_with_path(want)[0], flat_got):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-6,
                                       err_msg=f"M={micro}: {jax.tree_util.keystr(path)}")
        # The whole training step (the backward above, then each stage's AdamW update).
        state = pipeline.state(params, None)
        _, step_loss = pipeline.step(state, tokens, targets)
        np.testing.assert_allclose(float(step_loss), float(want_loss), rtol=1e-5)
        want_collectives = {"all_reduce_sum": stage_leaves + 1} if stage_devices > 1 else {}
        assert dict(pipeline._step.last_collectives) == want_collectives, (
            f"M={micro}, {stage_devices} devices a stage")


# -- a host lost mid-run --------------------------------------------------------------------------

def executor_of_slice(cluster: Cluster, client_id: int) -> tuple:
    """(slice id, host name, executor pid) of a host holding a device of the client's
    slice."""
    status = json.loads(cluster.atoll("status", "--json").stdout)
    slices = [s for s in status["slices"] if s["client"] == client_id]
    assert len(slices) == 1, f"client {client_id} holds no single slice: {status['slices']}"
    devices = slices[0]["devices"]
    host_of = {d["id"]: h["name"] for i in status["islands"] for h in i["hosts"]
               for d in h["devices"]}
    host = host_of[devices[0]]
    ready = pathlib.Path(cluster.state_dir, "run", f"executor-{host}.ready").read_text()
    pid = next(int(line.split("=")[1]) for line in ready.splitlines()
               if line.startswith("pid"))
    return slices[0]["id"], host, pid


@pytest.fixture()
def own_cluster() -> Any:
    """A cluster of its own (2 islands x 2 hosts x 2 devices): this test kills one of its
    executors (the supervisor starts it again)."""
    c = Cluster(SOURCE_DIR / "config" / "test.toml")
    try:
        yield c.start()
    finally:
        c.remove()


def test_elastic_run_resumes_from_its_checkpoint_after_an_executor_is_killed(
        own_cluster: Cluster) -> None:
    steps, every, kill_after = 10, 4, 5
    run = ["--layout", "spmd", "--devices", "2", "--steps", str(steps), "--checkpoint-every",
           str(every)] + SMALL
    with own_cluster.connect(name="lm-uninterrupted") as c:
        whole = train.main(run + ["--checkpoint", "lm/whole"], client=c)
    killed: Dict[str, Any] = {}
    with own_cluster.connect(name="lm-elastic") as c:
        def kill_mid_run(step: int, loss: float) -> None:
            # The loss of step kill_after is read while the next step is already submitted.
            if step == kill_after and not killed:
                slice_id, host, pid = executor_of_slice(own_cluster, c.id)
                killed.update(slice=slice_id, host=host, pid=pid)
                os.kill(killed["pid"], signal.SIGKILL)

        elastic = train.main(run + ["--checkpoint", "lm/elastic", "--elastic"], client=c,
                             after_step=kill_mid_run)
    assert killed, "the executor was never killed"
    # It failed after the kill, went back to its last checkpoint (step 4: steps 6 and 7 fail,
    # and with them the save of step 8, unless step 7 was submitted after the executor was
    # back and the step-8 save went through) and trained to the end by itself.
    assert elastic["resumed_from"] and elastic["resumed_from"][0] in (every, 2 * every), elastic
    assert len(elastic["losses"]) == steps
    np.testing.assert_allclose(elastic["losses"], whole["losses"], rtol=1e-5)
    # The RM saw the host lost and remapped the training slice (onto the island's other host).
    log = pathlib.Path(own_cluster.state_dir, "logs", "rm.log").read_text()
    assert re.search(f"on host {killed['host']} (was|were) lost", log), log[-2000:]
    assert f"slice {killed['slice']} remapped onto devices" in log, log[-2000:]
