//! Compiles `proto/kuberaft.proto` with protox (a pure-Rust protobuf compiler), so building
//! kuberaft needs no system `protoc`.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/kuberaft.proto");
    let fds = protox::compile(["kuberaft.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
