//! Generates the gRPC code from proto/tidal.proto with a vendored protoc, so that no system
//! protobuf compiler is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY-free: build scripts are single-threaded; cargo reads PROTOC from our environment.
    unsafe {
        std::env::set_var("PROTOC", protoc);
    }
    println!("cargo:rerun-if-changed=proto/tidal.proto");
    // `Column.fixed` as `Bytes`: decoding it takes a slice of the received buffer, so its
    // values are copied once, into the column.
    tonic_prost_build::configure()
        .bytes(".tidal.v1.Column.fixed")
        .compile_protos(&["proto/tidal.proto"], &["proto"])?;
    Ok(())
}
