#!/usr/bin/env bash
# Starts the reference local server by hand, as the issue that asked for it was found:
# `llama-server -c 4096` with the small coder model, on 127.0.0.1:8080 (the port tern's
# first-run screen looks at). Builds it first when the cache has nothing yet.
#
#   benches/local_llm/serve.sh               # window 4096, port 8080
#   CONTEXT=8192 PORT=8081 benches/local_llm/serve.sh
#
# Then, in a project: OPENAI_BASE_URL=http://127.0.0.1:8080/v1 tern
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
paths="$("$here/build.sh")"
server="$(sed -n 's/^server: //p' <<<"$paths")"
model="$(sed -n 's/^model: //p' <<<"$paths")"

exec "$server" -m "$model" -c "${CONTEXT:-4096}" --host 127.0.0.1 --port "${PORT:-8080}" --jinja
