//! Support code of the `ataman` binary that its tests share.

pub mod backup_client;
pub mod backup_cluster;
pub mod backup_cmd;
pub mod backup_progress;
pub mod backup_restore;
pub mod backup_tar;
pub mod cert_cmd;
pub mod cluster_cmd;
pub mod crash_writer;
pub mod ctl;
pub mod faultproxy;
pub mod harness;
pub mod healthcheck;
pub mod http_client;
pub mod launcher;
pub mod logging;
