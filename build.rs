//! Generates the gRPC API from `proto/` with the vendored protoc (nothing to install).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; the variable is read by the code generator.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // A request that does not decode is the caller's error (`service::codec`), not INTERNAL.
    tonic_prost_build::configure()
        .codec_path("crate::service::codec::RequestCodec")
        .file_descriptor_set_path(out.join("fieldguard_descriptor.bin"))
        .compile_protos(&["proto/fieldguard/v1/fieldguard.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
