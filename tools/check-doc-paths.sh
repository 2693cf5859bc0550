#!/usr/bin/env bash
# Every repository path the READMEs name exists (tools/test.sh runs this).
#
# A word in README.md, benches/README.md, tests/README.md or
# tools/README.md that looks like a path (`name/name...`, link targets
# included) and whose first part is an entry of the repository's root or
# of the README's own directory must name an existing file or directory
# there (`../` paths: from the README's directory); `*` in it must match
# at least one. Words under `./`, `data/` and `target/` are what the
# service and cargo create at run time, and words
# whose first part exists in neither place (`application/json`,
# `/etc/litestream.yml`, URLs) are not repository paths.
#
#   bash tools/check-doc-paths.sh
set -euo pipefail
cd "$(dirname "$0")/.."

docs=(README.md benches/README.md tests/README.md tools/README.md)
missing=0
for doc in "${docs[@]}"; do
  dir="$(dirname "$doc")"
  while IFS= read -r word; do
    word="${word%%#*}"
    word="${word%.}"
    first="${word%%/*}"
    # `./x` is the working directory's (the user's dialproof.toml, data/),
    # not the repository's.
    case "$first" in . | data | target | "") continue ;; esac
    if [ "$first" = ".." ]; then
      bases=("$dir")
    else
      bases=(. "$dir")
    fi
    named=0
    found=0
    for base in "${bases[@]}"; do
      [ -e "$base/$first" ] || continue
      named=1
      if compgen -G "$base/$word" >/dev/null; then found=1; fi
    done
    if [ "$named" = 1 ] && [ "$found" = 0 ]; then
      echo "$doc: names $word, which is not in the repository"
      missing=1
    fi
  done < <(grep -oE '[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]+)*/?' "$doc" | grep / | sort -u)
done
if [ "$missing" != 0 ]; then
  echo "check-doc-paths: a README names a path that does not exist (fix the README or the path)"
  exit 1
fi
echo "check-doc-paths: every path the READMEs name exists"
