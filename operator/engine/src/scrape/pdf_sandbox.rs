//! PDF extraction in a child process under resource limits.
//!
//! The parser crates allocate as much as a file asks for and cannot be interrupted from outside,
//! so a thread that timed out would keep its CPU and memory. A child process is stopped for
//! real: it runs with an address-space limit and a CPU-time limit (`setrlimit`), dies with its
//! parent, and is killed when its wall-clock time is up. The binary that embeds the engine
//! installs a [`PdfSandbox`] naming itself (the `quarry` binary answers a hidden subcommand
//! with [`helper_main`]); without one, extraction stays in-process (library use and tests).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use super::pdf::{self, PdfError, PdfText};
use std::panic::AssertUnwindSafe;

/// Extracts title and text from PDF bytes within [`pdf::PDF_TIMEOUT`], in the installed sandbox or
/// else on the blocking pool.
pub async fn extract_pdf(bytes: Vec<u8>) -> Result<PdfText, PdfError> {
    extract_pdf_within(bytes, pdf::PDF_TIMEOUT).await
}

/// [`extract_pdf`] with another time limit.
pub async fn extract_pdf_within(bytes: Vec<u8>, limit: Duration) -> Result<PdfText, PdfError> {
    if let Some(sandbox) = installed() {
        return extract_in(sandbox, bytes, limit).await;
    }
    let task = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(AssertUnwindSafe(|| pdf::extract_blocking(&bytes, limit)))
    });
    // The in-task deadline normally ends the work; this outer bound covers a parser stuck
    // somewhere that writes no text (the thread then finishes on its own, unobserved: only the
    // sandbox stops such work for real).
    match tokio::time::timeout(limit + Duration::from_secs(1), task).await {
        Err(_) => Err(PdfError::Timeout(limit)),
        Ok(Err(join)) => Err(PdfError::Crashed(join.to_string())),
        Ok(Ok(Err(panic))) => Err(PdfError::Crashed(pdf::panic_message(panic.as_ref()))),
        Ok(Ok(Ok(result))) => result,
    }
}

/// Address space a helper may map (the binary, its heap and the parser's data).
pub const HELPER_MEMORY_BYTES: u64 = 768 * 1024 * 1024;
/// Helpers running at once in this process; later extractions wait for a slot.
pub const MAX_HELPERS: usize = 2;
/// Largest PDF handed to a helper (fetched bodies are capped far below this).
const MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;
/// Largest answer read back: the text cap, JSON-escaped, with room to spare.
const MAX_OUTPUT_BYTES: u64 = 8 * pdf::MAX_PDF_TEXT_BYTES as u64;
/// Time on top of the extraction's own limit for starting the helper and reading its answer.
const GRACE: Duration = Duration::from_secs(2);

/// How to start a helper: `program args... <limit-ms> <memory-bytes>`, PDF on stdin, the
/// JSON of a `Result<PdfText, PdfError>` on stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfSandbox {
    /// The executable (the embedding binary itself, or the engine's `quarry-pdf-helper`).
    pub program: PathBuf,
    /// Arguments before the limits (the hidden subcommand).
    pub args: Vec<OsString>,
    /// The helper's address-space limit.
    pub memory_bytes: u64,
}

impl PdfSandbox {
    /// A sandbox running `program args...` with the default memory limit.
    pub fn new(program: impl Into<PathBuf>, args: &[&str]) -> Self {
        Self {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            memory_bytes: HELPER_MEMORY_BYTES,
        }
    }
}

static SANDBOX: OnceLock<PdfSandbox> = OnceLock::new();

/// Makes every later [`extract_pdf`] of this process run in `sandbox`; the first call
/// wins (returns false when one was installed already).
pub fn install(sandbox: PdfSandbox) -> bool {
    SANDBOX.set(sandbox).is_ok()
}

/// The installed sandbox, if any.
pub fn installed() -> Option<&'static PdfSandbox> {
    SANDBOX.get()
}

fn slots() -> &'static Semaphore {
    static SLOTS: Semaphore = Semaphore::const_new(MAX_HELPERS);
    &SLOTS
}

/// Extracts `bytes` in a helper of `sandbox` within `limit`; the helper is killed (and reaped)
/// when the limit and a short grace have passed.
pub async fn extract_in(
    sandbox: &PdfSandbox,
    bytes: Vec<u8>,
    limit: Duration,
) -> Result<PdfText, PdfError> {
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(PdfError::TooLarge(MAX_INPUT_BYTES));
    }
    let _slot = slots()
        .acquire()
        .await
        .map_err(|e| PdfError::Crashed(format!("PDF helper slots closed: {e}")))?;
    let mut child = tokio::process::Command::new(&sandbox.program)
        .args(&sandbox.args)
        .arg(limit.as_millis().to_string())
        .arg(sandbox.memory_bytes.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            PdfError::Crashed(format!(
                "cannot start the PDF helper {}: {e}",
                sandbox.program.display()
            ))
        })?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(PdfError::Crashed("the PDF helper has no pipes".to_string()));
    };
    let talk = async {
        let write = async {
            // A helper that died early closes its end: its exit status tells why.
            let _ = stdin.write_all(&bytes).await;
            drop(stdin);
        };
        let read = async {
            let mut out = Vec::new();
            let _ = stdout.take(MAX_OUTPUT_BYTES).read_to_end(&mut out).await;
            out
        };
        let ((), out) = tokio::join!(write, read);
        let status = child.wait().await;
        (out, status)
    };
    let (out, status) = match tokio::time::timeout(limit + GRACE, talk).await {
        Ok(done) => done,
        Err(_) => {
            // Kill and reap now, so that nothing of it outlives the call.
            let _ = child.kill().await;
            return Err(PdfError::Timeout(limit));
        }
    };
    let status = status.map_err(|e| PdfError::Crashed(format!("PDF helper: {e}")))?;
    if !status.success() {
        return Err(stopped(status));
    }
    serde_json::from_slice::<Result<PdfText, PdfError>>(&out)
        .map_err(|e| PdfError::Crashed(format!("unreadable answer from the PDF helper: {e}")))?
}

/// The error for a helper that ended without an answer.
fn stopped(status: std::process::ExitStatus) -> PdfError {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(libc::SIGXCPU) | Some(libc::SIGKILL) => {
            PdfError::Stopped("it used up its CPU time".to_string())
        }
        // An allocation over the address-space limit aborts the process.
        Some(libc::SIGABRT) | Some(libc::SIGSEGV) | Some(libc::SIGBUS) => {
            PdfError::Stopped("it ran out of its memory limit or crashed".to_string())
        }
        Some(sig) => PdfError::Stopped(format!("signal {sig}")),
        None => PdfError::Stopped(format!("exit status {}", status.code().unwrap_or(-1))),
    }
}

/// The helper's entry point: `args` are `<limit-ms> <memory-bytes>`; reads the PDF on stdin
/// and writes the JSON answer on stdout, under the limits.
pub fn helper_main(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let mut num = || {
        args.next()
            .and_then(|a| a.into_string().ok())
            .and_then(|a| a.parse::<u64>().ok())
    };
    let (Some(limit_ms), Some(memory)) = (num(), num()) else {
        eprintln!("usage: <limit-ms> <memory-bytes> < file.pdf");
        return ExitCode::from(2);
    };
    let limit = Duration::from_millis(limit_ms);
    if let Err(e) = confine(limit, memory) {
        eprintln!("cannot set the resource limits: {e}");
        return ExitCode::from(3);
    }
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_INPUT_BYTES)
        .read_to_end(&mut bytes)
    {
        eprintln!("cannot read the PDF: {e}");
        return ExitCode::from(4);
    }
    let result = std::panic::catch_unwind(|| pdf::extract_blocking(&bytes, limit))
        .unwrap_or_else(|p| Err(PdfError::Crashed(pdf::panic_message(p.as_ref()))));
    let answer = match serde_json::to_vec(&result) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cannot encode the answer: {e}");
            return ExitCode::from(5);
        }
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(&answer).and_then(|()| out.flush()).is_err() {
        return ExitCode::from(6);
    }
    ExitCode::SUCCESS
}

/// Limits this process: address space, CPU seconds (the limit rounded up, plus one), no core
/// files, and death with the parent.
fn confine(limit: Duration, memory: u64) -> std::io::Result<()> {
    let cpu = limit.as_secs() + u64::from(limit.subsec_nanos() > 0) + 1;
    // A limit is only ever lowered: an unprivileged process cannot raise a hard limit.
    macro_rules! set_limit {
        ($resource:expr, $soft:expr, $hard:expr) => {{
            let mut now = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes the rlimit struct passed by reference and nothing else.
            if unsafe { libc::getrlimit($resource, &mut now) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let hard = now.rlim_max.min($hard);
            let lim = libc::rlimit {
                rlim_cur: hard.min($soft),
                rlim_max: hard,
            };
            // SAFETY: setrlimit reads the rlimit struct passed by reference and nothing else.
            if unsafe { libc::setrlimit($resource, &lim) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }};
    }
    set_limit!(libc::RLIMIT_AS, memory, memory);
    // The soft limit sends SIGXCPU, the hard one a second later SIGKILL.
    set_limit!(libc::RLIMIT_CPU, cpu, cpu + 1);
    set_limit!(libc::RLIMIT_CORE, 0, 0);
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and touches no memory.
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
