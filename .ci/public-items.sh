#!/usr/bin/env bash
# Counts the facade's public items the way a reader of its docs meets them: one rustdoc page
# per item (struct, enum, trait, fn, macro, attribute, derive, type alias, constant, static,
# union) plus one per module, under target/doc/<crate>/, built with every feature.
# Hidden items (`#[doc(hidden)]`, such as the expansions' private module) have no page and so
# are not counted; a re-exported module counts with everything in it. The guide modules
# (`guide::*`, documentation chapters with no items) are counted apart.
#
# Usage: .ci/public-items.sh [--no-build] [--list] [--max N]
#   --no-build  count the pages already under target/doc/<crate>/
#   --list      print every page counted, one a line (path under target/doc/<crate>/)
#   --max N     exit 1 when the count is above N (CI's ceiling)
set -euo pipefail

build=1 list=0 max=""
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=0 ;;
        --list) list=1 ;;
        --max) shift; max="$1" ;;
        *) echo "public-items.sh: unknown argument \`$1\`; use --no-build, --list or --max N" >&2; exit 2 ;;
    esac
    shift
done

cd "$(dirname "$0")/.."
# The facade's package, and its crate name (the folder rustdoc writes).
package=velocity-policy
crate=${package//-/_}
target="${CARGO_TARGET_DIR:-target}"
if [ "$build" = 1 ]; then
    # A stale page of an item removed since the last build would still be counted.
    rm -rf "$target/doc/$crate"
    cargo doc --no-deps --all-features -p "$package" --quiet
fi
root="$target/doc/$crate"
if [ ! -f "$root/index.html" ]; then
    echo "public-items.sh: no docs at $root; run without --no-build" >&2
    exit 2
fi

# Item pages, and one page per module (a module's page is its folder's index.html). rustdoc
# also writes redirect pages for re-exports under another path (`struct.X.html` that only
# points elsewhere, kept for old links); those are not items, so pages that are redirects are
# left out.
pages=$(cd "$root" && find . -type f \( -name 'struct.*.html' -o -name 'enum.*.html' \
        -o -name 'trait.*.html' -o -name 'fn.*.html' -o -name 'macro.*.html' \
        -o -name 'attr.*.html' -o -name 'derive.*.html' -o -name 'type.*.html' \
        -o -name 'constant.*.html' -o -name 'static.*.html' -o -name 'union.*.html' \
        -o -name 'traitalias.*.html' -o -name 'index.html' \) -print0 \
    | xargs -0 grep -L '<meta http-equiv="refresh"' | sed 's|^\./||' | sort)
# The guides (`guide::*`) are chapters of documentation with no items in them: counted apart.
guides=$(printf '%s\n' "$pages" | grep -c '^guide/' || true)
pages=$(printf '%s\n' "$pages" | grep -v '^guide/' || true)
count=$(printf '%s\n' "$pages" | grep -c . || true)

if [ "$list" = 1 ]; then
    printf '%s\n' "$pages"
fi
# The crate root's index.html is the crate, not a module of it.
echo "public items in the facade ($package, all features): $count pages (modules $(printf '%s\n' "$pages" | grep -c 'index.html$' || true), crate root included; besides, $guides guide pages)"
if [ -n "$max" ] && [ "$count" -gt "$max" ]; then
    echo "public-items.sh: $count public items, above the ceiling of $max; re-export less from src/lib.rs, or raise the ceiling in .ci/run with a reason" >&2
    exit 1
fi
