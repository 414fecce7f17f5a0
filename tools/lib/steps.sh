# Shared by the build tools (tools/k8s, tools/helm, tools/image): `step` prints one progress line;
# `run` runs one step quietly into "$log" and, on failure, prints the log's tail and where the whole
# log is, then exits. The sourcing script sets "$tool_name" (the line prefix) and "$log".

step() { printf '[%s] %s\n' "$tool_name" "$*"; }

run() {
  local name=$1; shift
  step "$name"
  local started=$SECONDS
  if ! { echo "### $name: $*"; "$@"; } >>"$log" 2>&1; then
    echo "[$tool_name] FAILED: $name; last lines of the log:" >&2
    tail -n 25 "$log" >&2
    echo "[$tool_name] full log: $log" >&2
    exit 1
  fi
  echo "### $name took $((SECONDS - started))s" >>"$log"
}
