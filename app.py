"""Hugging Face Space entry point: Spaces run `python app.py` (docs/space.md).

Serves the bundled model on all interfaces. The package `app/` shadows this file for imports (a
package wins over a module of the same name on sys.path), so `import app` always means the
package; this file is only ever run as a script.
"""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from app.__main__ import main  # noqa: E402  (after the environment is set)

if __name__ == "__main__":
    main(["--host", os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
          "--port", os.environ.get("GRADIO_SERVER_PORT", "7860")])
