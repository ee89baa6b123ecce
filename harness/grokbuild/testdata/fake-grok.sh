#!/bin/sh
# A stand-in for the Grok Build CLI (see README.md).
set -u
die() { echo "fake-grok: $*" >&2; exit 2; }
rec=${FAKE_GROK_RECORD:?}
mkdir -p "$rec"
: >"$rec/argv"
for a in "$@"; do printf '%s\n' "$a" >>"$rec/argv"; done
printf '%s' "${XAI_API_KEY-<unset>}" >"$rec/xai_api_key"
printf '%s' "${GROK_API_KEY-<unset>}" >"$rec/grok_api_key"
printf '%s' "${GROK_DISABLE_AUTOUPDATER-<unset>}" >"$rec/autoupdater"
fmt= prompt= cwd=
while [ $# -gt 0 ]; do
  case $1 in
  --output-format) fmt=$2; shift ;;
  --prompt-file) prompt=$2; shift ;;
  --cwd) cwd=$2; shift ;;
  -p|--single) die "the prompt must not be in argv" ;;
  esac
  shift
done
[ "$fmt" = streaming-json ] || die "--output-format is '$fmt'"
[ -f "$prompt" ] || die "no prompt file"
[ -d "$cwd" ] || die "--cwd '$cwd' is not a directory"
[ "$(pwd -P)" = "$(cd "$cwd" && pwd -P)" ] || die "started outside --cwd"
cp "$prompt" "$rec/prompt"
if [ -f "$cwd/.grok/config.toml" ]; then cp "$cwd/.grok/config.toml" "$rec/config.toml"; fi
if [ -n "${FAKE_GROK_TOUCH-}" ]; then echo touched >"$cwd/$FAKE_GROK_TOUCH"; fi
if [ -n "${FAKE_GROK_SLEEP-}" ]; then
  head -n 1 "${FAKE_GROK_STREAM:?}"
  sleep "$FAKE_GROK_SLEEP"
fi
cat "${FAKE_GROK_STREAM:?}"
exit "${FAKE_GROK_EXIT:-0}"
