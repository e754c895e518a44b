#!/bin/sh
# agent.sh: the default human entry. It resolves ctx and execs `ctx agent ...`; nothing else.
set -eu
ctx=$(command -v ctx 2>/dev/null || echo "${CTX_ROOT:-/ctx}/bin/ctx")
case "${1:-}" in
--watch) exec "$ctx" agent watch "${2:?usage: agent.sh --watch AGENT}" --session default ;;
--attach) exec "$ctx" agent attach "${2:?usage: agent.sh --attach AGENT}" --session default ;;
"" | -*) echo "usage: agent.sh [--watch|--attach] AGENT [INPUT...]" >&2 && exit 2 ;;
esac
agent=$1
shift
[ $# -eq 0 ] && exec "$ctx" agent chat "$agent" --session default
exec "$ctx" agent send "$agent" --session default -- "$@"
