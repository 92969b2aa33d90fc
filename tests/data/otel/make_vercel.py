"""Make ``vercel_ai.otlp.jsonl``: the spans of the Vercel AI SDK (``ai`` 6, its
``experimental_telemetry``) around a ``generateText`` agent with tools, on the SDK's OpenAI
provider calling the scripted server of ``tests/openai_server.py`` on 127.0.0.1, sent by
OpenTelemetry's OTLP/HTTP JSON exporter for JavaScript (``vercel/agent.mjs``, its
dependencies pinned in ``vercel/package.json``) to a loopback endpoint that keeps each body
posted as a line.

Needs Node.js 20 and npm (the packages are installed into a temporary folder). Run from the
repository's root: ``.venv/bin/python tests/data/otel/make_vercel.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))  # tests/, for openai_server

QUESTIONS = {
    "Multiply 7 by 8 for me.": [[("multiply_numbers", {"a": 8, "b": 7})]],
    "One backpack, one bottle and one pen: how much is that altogether?": [
        [("list_items", {})],
        [("add_numbers", {"a": 25, "b": 8})],
        [("add_numbers", {"a": 33, "b": 1.2})],
    ],
}


def main() -> None:
    from openai_server import OpenAIServer

    from tcbreplay._importers.otel.collect_http import read_body

    bodies: list[bytes] = []

    class Capture(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(read_body(self.rfile, self.headers))  # chunked, as node sends it
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    capture = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=capture.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(QUESTIONS) as server:
        for name in ("package.json", "agent.mjs"):
            shutil.copy(HERE / "vercel" / name, Path(tmp) / name)
        npm = ["npm", "install", "--no-audit", "--no-fund", "--silent"]
        subprocess.run(npm, cwd=tmp, check=True)
        endpoint = f"http://127.0.0.1:{capture.server_address[1]}"
        subprocess.run(["node", "agent.mjs", server.url, endpoint], cwd=tmp, check=True)
    capture.shutdown()
    out = HERE / "vercel_ai.otlp.jsonl"
    out.write_bytes(b"".join(body.replace(b"\n", b"") + b"\n" for body in bodies))
    print("wrote", out.name, f"({len(bodies)} requests)")


if __name__ == "__main__":
    main()
