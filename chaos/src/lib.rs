//! Drives kuberaft from outside, as a client: benchmarks against etcd (`kuberaft-bench`) and
//! the fault-injection harness that proves its guarantees (`kuberaft-chaos`).
//!
//! The benchmark modules (`client`, `cluster`, `workload`, `report`) compare throughput and
//! latency; the chaos modules start a cluster whose peer links run through a fault-injecting
//! proxy (`proxy`, `harness`), inject a seeded schedule of faults (`faults`), run real API
//! clients that record what they saw (`api`, `history`, `workloads`), check the recorded
//! history (`checkers`) and write the verdict (`verdict`, `chart`). `run` ties them together;
//! `failover` measures leader failover the same way on kuberaft and etcd; `watchbench` measures
//! watch delivery latency with many watchers (with the CPU it cost, `cpu`), against etcd and
//! the fan-out `floor`; `backupbench` measures what online backups cost the replica that takes
//! them; `codecbench` measures the API's wire encodings (JSON, protobuf, CBOR) in process;
//! `admissionbench` measures what webhooks, policies and quotas cost a create; `clusterbench`
//! simulates a large cluster's steady state (nodes, leases, pods, kubelets, informers).

pub mod admissionbench;
pub mod api;
pub mod backupbench;
pub mod chart;
pub mod checkers;
pub mod client;
pub mod cluster;
pub mod clusterbench;
pub mod codecbench;
pub mod cpu;
pub mod failover;
pub mod faults;
pub mod floor;
pub mod harness;
pub mod history;
pub mod proxy;
pub mod report;
pub mod run;
pub mod verdict;
pub mod watchbench;
pub mod workload;
pub mod workloads;
