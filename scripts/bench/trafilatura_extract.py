"""Extracts every page of the article-extraction benchmark with trafilatura and writes JSON.

Usage: trafilatura_extract.py <bench dir> <out.json> [passes]

Single-threaded; the time measured covers the extraction calls only (not reading or
decompressing the pages, not writing the JSON), so it compares with Quarry's per-page time.
`seconds` is the thread's CPU time (`time.thread_time`), so pages per second are per core and
other work on the machine does not count; `wallSeconds` is the wall time of the same pass. The
pages are extracted `passes` times (default 3) and the fastest pass is reported, as the Rust side
does.
The texts are scored by the Rust benchmark (operator/engine/benches/extraction.rs) with the same metric
code as Quarry's own output.
"""

import gzip
import json
import pathlib
import sys
import time

import trafilatura


def main() -> int:
    bench = pathlib.Path(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    truth = json.loads((bench / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for page_id, entry in sorted(truth.items()):
        html = gzip.decompress((bench / "html" / f"{page_id}.html.gz").read_bytes()).decode("utf-8")
        pages.append((page_id, entry.get("url"), html))
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    texts = {}
    timings = []
    for _ in range(max(passes, 1)):
        cpu = 0.0
        wall = 0.0
        for page_id, url, html in pages:
            wall_started = time.perf_counter()
            cpu_started = time.thread_time()
            # Comments are not part of the labelled article body.
            text = trafilatura.extract(html, url=url, include_comments=False)
            cpu += time.thread_time() - cpu_started
            wall += time.perf_counter() - wall_started
            texts[page_id] = text or ""
        timings.append((cpu, wall))
    elapsed, wall = min(timings)
    out.write_text(
        json.dumps(
            {
                "extractor": f"trafilatura {trafilatura.__version__} (Python)",
                "pages": len(pages),
                "seconds": elapsed,
                "wallSeconds": wall,
                "passSeconds": [t[0] for t in timings],
                "texts": texts,
            }
        ),
        encoding="utf-8",
    )
    print(
        f"trafilatura {trafilatura.__version__}: {len(pages)} pages, fastest of {len(timings)} passes "
        f"{elapsed:.2f} s CPU ({wall:.2f} s wall)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
