//! The PDF helper as its own executable, for embedders without a hidden subcommand and for the
//! engine's tests: `quarry-pdf-helper <limit-ms> <memory-bytes> < file.pdf`.

fn main() -> std::process::ExitCode {
    quarry_engine::scrape::pdf_sandbox::helper_main(std::env::args_os().skip(1))
}
