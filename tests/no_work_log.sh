#!/usr/bin/env bash
# Fails when a tracked file cites the old performance work log ("session 29",
# "sessions 23 and 24", "session29_h200/", "PERFORMANCE.md entry 31"). Comments and
# docs say why, never when; the log itself is in git history. Prints file:line of
# every citation and exits 1 if there is any. Run from the repository root (ctest:
# NoWorkLogCitations).
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --git-dir >/dev/null 2>&1 || { echo "not a git checkout: no tracked files to check"; exit 0; }
pattern='sessions? [0-9]+|session[0-9]+_|PERFORMANCE\.md,? *(session|entry|entries)|(work[- ]?log|PERFORMANCE\.md)[^.]{0,40}entr(y|ies) [0-9]+'
hits=$(git ls-files -z -- . ':!tests/no_work_log.sh' \
         | xargs -0 grep -n -i -I -E "$pattern" -- 2>/dev/null || true)
if [ -n "$hits" ]; then
  echo "$hits"
  echo "work-log citations in $(echo "$hits" | cut -d: -f1 | sort -u | wc -l) tracked files: say why, not when" >&2
  exit 1
fi
echo "no work-log citations in tracked files"
