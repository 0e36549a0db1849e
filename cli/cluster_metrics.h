// The metrics of a cluster, from its ClusterView, in Prometheus's text format: what
// `atoll dashboard` serves on /metrics, for a Prometheus server to scrape (one dashboard
// for a whole cluster, however many machines it spans). Every number comes from the events
// the services publish and the RM's status (cluster_view.h); none is kept by a service for
// this. docker/grafana/atoll.json charts them.
//
//   atoll_rm_up                              1 while the RM answers the dashboard
//   atoll_scheduler_up{island}               1 while the island's scheduler is alive
//   atoll_scheduler_queued_gangs{island}     gangs waiting in the scheduler (scheduler.stats)
//   atoll_scheduler_gangs_in_flight{island}  gangs dispatched and not finished
//   atoll_scheduler_held_dispatches{island}  messages held for executors whose queue is full
//   atoll_host_up{island,host}               1 while the host's executor is alive
//   atoll_device_busy_ratio{island,host,device}         busy fraction over the view's window
//   atoll_device_busy_seconds_total{island,host,device} the executor's busy time
//   atoll_device_queued_gangs{island,host,device}       gangs queued on the device's stream
//   atoll_device_gangs_done_total{island,host,device}   gangs finished since the dashboard
//                                                       started
//   atoll_store_up / _objects / _used_bytes / _capacity_bytes{island,host}   object store
//   atoll_sent_messages_total / atoll_sent_bytes_total{service,island,host,kind}
//                                            control messages each service sent, by kind
//   atoll_dataplane_tuples_total / _bytes_total{island,host,direction}   executors' tuples
//   atoll_dataplane_held_batches{island,host}   batches held for peers whose queue is full
//   atoll_loop_longest_stall_seconds{service,island,host}   the longest a service's event
//                                            loop went without reading its sockets, since
//                                            it started (the RM's status): one near the
//                                            liveness window is about to miss heartbeats
//   atoll_clients                            clients connected (the RM's count)
//   atoll_runs{state}                        programs "scheduled" or "running"
//   atoll_runs_finished_total{state}         programs finished "done", "failed", "abandoned"
//   atoll_run_duration_seconds               histogram of the "done" programs' durations
//
// Cumulative figures are the services' own counters (since each service started) unless
// said otherwise; a restarted service starts its counters again, which Prometheus's rate()
// takes as a counter reset.
#pragma once

#include <string>

#include "atoll/status.h"
#include "cli/cluster_view.h"

namespace atl {

// `rm_answering`: whether the RM answered the dashboard's last status request.
// Fails (InvalidArgument) only on a misnamed metric, a bug that the unit tests catch.
Result<std::string> ClusterMetricsText(const ClusterView& view, bool rm_answering);

}  // namespace atl
