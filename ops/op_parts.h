// The parts of a primitive family's one source, ops/<family>.cc: its type rules (with the
// shardings they keep), its cpu kernels and its gradient rules, in sections
//
//   #if ATOLL_OPS_TYPE_RULES ... #endif    compiled into atoll_ir     (namespace atl::ir::internal)
//   #if ATOLL_OPS_CPU_KERNELS ... #endif   compiled into atoll_compute (namespace atl::compute)
//   #if ATOLL_OPS_GRAD_RULES ... #endif    compiled into atoll_client (namespace atl::autodiff)
//
// each with its own includes. The parts live in different libraries for a reason: the
// resource manager, the scheduler and the object store link atoll_ir (they type functions)
// but must not link the kernels (oneDNN, OpenBLAS) or the client's autodiff. So
// ops/CMakeLists.txt compiles every family file once into each of the three libraries, each
// defining one of these macros to 1; this header gives the other two 0 and refuses a file
// compiled for no part or several. Each section defines the functions its rows of
// common/ir/ops.def name, which type_rules.h, compute/cpu_kernels.h and
// client/autodiff/grad_rules.h declare from the table.
#pragma once

#ifndef ATOLL_OPS_TYPE_RULES
#define ATOLL_OPS_TYPE_RULES 0
#endif
#ifndef ATOLL_OPS_CPU_KERNELS
#define ATOLL_OPS_CPU_KERNELS 0
#endif
#ifndef ATOLL_OPS_GRAD_RULES
#define ATOLL_OPS_GRAD_RULES 0
#endif
#if ATOLL_OPS_TYPE_RULES + ATOLL_OPS_CPU_KERNELS + ATOLL_OPS_GRAD_RULES != 1
#error "an ops/ family file is compiled for exactly one part (see ops/CMakeLists.txt)"
#endif
