//! Compiles the etcd KV subset the benchmark uses, with protox (no system `protoc`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/etcd_kv.proto");
    let fds = protox::compile(["etcd_kv.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}
