#!/usr/bin/env bash
# Runs the LangGraph JS server's own API test suite (libs/langgraph-api/tests/api.test.mts of a
# langchain-ai/langgraphjs checkout) against `berth dev` of this checkout serving that suite's
# tests/graphs. Nothing of the suite is kept in this repository: it is copied from the checkout
# into a scratch folder, with its hard-coded server address (localhost:2024) replaced by ours.
#
#   scripts/upstream-langgraph-suite.sh <langgraphjs checkout> [port] [vitest -t filter]
#
# Build first (`make build`). The port defaults to 2124 (2024, the suite's own, is often taken).
# Prints one line per test and the vitest summary; the full log is in <scratch>/vitest.log. The
# suite's truncate calls (POST /internal/truncate) get 404: Berth has no such route on purpose.
set -euo pipefail

upstream=$(realpath "${1:?usage: $0 <langgraphjs checkout> [port] [filter]}")
port=${2:-2124}
filter=${3:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
tests=$upstream/libs/langgraph-api/tests
[[ -f $tests/api.test.mts ]] || { echo "no libs/langgraph-api/tests/api.test.mts under $upstream" >&2; exit 2; }
[[ -f $repo/cli/dist/bin.js ]] || { echo "build Berth first: make build" >&2; exit 2; }

scratch=$repo/.berth/upstream-suite
mkdir -p "$scratch"
rm -rf "$scratch/tests" "$scratch/.berth"
cp -r "$tests" "$scratch/tests"
rm -rf "$scratch/tests/graphs/.berth" "$scratch/tests/graphs/.langgraph_api"
sed -i "s#http://localhost:2024#http://127.0.0.1:$port#g" "$scratch/tests/api.test.mts"

# The suite's own dependencies, at the versions of @langchain/* that Berth runs with.
version() { node -p "require('$repo/node_modules/$1/package.json').version"; }
cat > "$scratch/package.json" <<EOF
{
  "name": "berth-upstream-langgraph-suite",
  "private": true,
  "type": "module",
  "dependencies": {
    "@langchain/core": "$(version @langchain/core)",
    "@langchain/langgraph": "$(version @langchain/langgraph)",
    "@langchain/langgraph-checkpoint": "$(version @langchain/langgraph-checkpoint)",
    "@langchain/langgraph-sdk": "$(version @langchain/langgraph-sdk)",
    "hono": "^4.12.0",
    "jose": "^6.0.10",
    "postgres": "^3.4.5",
    "vitest": "^4.1.10",
    "wait-port": "^1.1.0",
    "zod": "^4.1.0"
  }
}
EOF
printf 'export default { test: { hideSkippedTests: true, testTimeout: 30000, fileParallelism: false } };\n' > "$scratch/vitest.config.mjs"
(cd "$scratch" && npm install --no-fund --no-audit --loglevel=error >/dev/null)

(cd "$scratch/tests/graphs" && exec node "$repo/cli/dist/bin.js" dev --port "$port" --no-reload --no-trace >"$scratch/berth-dev.log" 2>&1) &
dev=$!
trap 'kill $dev 2>/dev/null || true; wait $dev 2>/dev/null || true' EXIT
for _ in $(seq 90); do
  curl -sf "http://127.0.0.1:$port/ok" >/dev/null && break
  kill -0 $dev 2>/dev/null || { cat "$scratch/berth-dev.log" >&2; exit 1; }
  sleep 1
done
grep -q "Agent server ready at http://127.0.0.1:$port " "$scratch/berth-dev.log" || { echo "berth dev is not on port $port:" >&2; cat "$scratch/berth-dev.log" >&2; exit 1; }

echo "upstream commit: $(git -C "$upstream" rev-parse HEAD 2>/dev/null || echo unknown)"
(cd "$scratch" && npx vitest run tests/api.test.mts --reporter=verbose ${filter:+-t "$filter"} 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >vitest.log) || true
grep -E '^ +(✓|×|↓) ' "$scratch/vitest.log" || true
grep -E '^ +Tests +[0-9]' "$scratch/vitest.log"
