//! The build and the edge: `policy locality`, `policy assets` and `policy gate`.
//!
//! # Where things run: `policy locality`
//!
//! A function near the user but far from its database pays the distance on every round trip.
//! The `locality` stanza declares the calls a request makes; the regions are derived from the
//! environment, never typed:
//!
//! ```text
//! // The calls one request makes, each located by the variable that holds the service's address.
//! locality {
//!     database = blocking env DATABASE_URL // session lookup on every authenticated request
//!     cache = blocking env UPSTASH_REDIS_REST_URL // rate limit before auth, and every shared cache read
//!     assets = async env R2_URL // fetched by the browser, never through a function
//! }
//! ```
//!
//! With a Vercel `fra1` deployment, a Neon database in `eu-central-1`, a legacy Upstash `us1`
//! database and an R2 bucket (`vercel env pull production.env`),
//! `policy locality --env-file production.env service.policy` prints regions only, never a host
//! or a credential:
//!
//! ```text
//! compute              eu-central-1  Vercel         env:VERCEL_REGION=fra1
//! relational database  eu-central-1  Neon           env:DATABASE_URL
//! object storage       —             Cloudflare R2  env:R2_URL                  R2 has no region
//! cache                us-east-1     Upstash        env:UPSTASH_REDIS_REST_URL
//!
//! blocking  compute → database  env:DATABASE_URL            same region      eu-central-1
//! blocking  compute → cache     env:UPSTASH_REDIS_REST_URL  crosses regions  eu-central-1 → us-east-1
//! async     compute → assets    env:R2_URL                  unknown          R2 has no region
//! ```
//!
//! With `--check` a blocking hop that crosses regions fails (exit 1); an unknown region is a
//! warning that says why (`region: null` is an answer, not a failure):
//!
//! ```text
//! policy::cross-region-hop
//!
//!   x blocking hop `cache` crosses regions: the compute runs in `eu-central-1`,
//!   | the service in `us-east-1`
//!    ,-[service.policy:4:13]
//!  3 |     database = blocking env DATABASE_URL // session lookup on every authenticated request
//!  4 |     cache = blocking env UPSTASH_REDIS_REST_URL // rate limit before auth, and every shared cache read
//!    :             ^^^^|^^^     ^^^^^^^^^^^|^^^^^^^^^^
//!    :                 |                   `-- locates the service in `us-east-1`
//!    :                 `-- the request waits for this call
//!  5 |     assets = async env R2_URL // fetched by the browser, never through a function
//!    `----
//!   help: the request pays the distance on every round trip: move the compute to
//!         `us-east-1` or the service to `eu-central-1`, or make the hop `async`
//!         if the request need not wait for it
//!
//! policy locality: 1 error, 0 warnings in 3 hops
//! ```
//!
//! Without `--env-file` it reads the process environment; `--format json` prints the probe's map
//! with the hops added. Nothing the command prints, in any format, contains a host, a user, a
//! password or a token (a property test feeds it generated ones).
//!
//! # Asset delivery: `policy assets`
//!
//! `policy assets web/dist` audits what a built front end ships, page by page, as a phone would
//! load it (Lighthouse's default device): it applies each page's style sheets (parsed with
//! `cssparser`, selectors matched with `selectors`), picks the file each `<img>` downloads from its
//! `srcset` and `<picture>`, the backgrounds rendered elements load and the font faces the text
//! needs (and the `src` of each a browser takes), and estimates where everything lands. It reports
//! over-quality JPEGs (the quality read from their quantisation tables, with the size at quality
//! 85), PNGs and JPEGs an AVIF would shrink, images with many more pixels than their box, `<img>`
//! without a size from attributes or CSS, stretched images, the likely LCP image lazy-loaded or at
//! the default priority, eager images far below the fold (an estimate), used faces whose
//! `font-display` hides text, fonts that are not WOFF2, oversized files, priority spent on
//! everything, and missing or damaged files. Each finding names its rule (the Lighthouse audit's
//! id where it is one), the file, line, column and fix, on the terminal or as `--format json`
//! (with the images and fonts each page downloads). Ceilings come from an `assets` stanza
//! (`assets web { dir = "web/dist"; max_image = 200kb }`), or defaults without one; `policy gate`
//! runs the audit of every `assets` stanza too. A 40-page site takes about 13 ms (`cargo bench -p
//! velocity-policy-delivery --features audit --bench assets`), where Lighthouse takes 15 to 70 s a page. At run time,
//! `ImageDimensionsLayer` (feature `delivery`) fills in the missing `width`/`height` of
//! `<img>` in HTML responses from a manifest of image sizes read at startup, so served pages stop
//! shifting before their templates are fixed (about 80 µs per 40 KiB page; `BENCHMARKS.md`).
//!
//! How often it agrees with Lighthouse, rule by rule (the rules, their Lighthouse audits and where
//! they differ on purpose are in `velocity-policy-delivery/src/assets/mod.rs`):
//!
//! <!-- agreement: computed by velocity-policy-delivery/tests/lighthouse.rs -->
//! Measured on the 9 pages of `velocity-policy-delivery/tests/fixtures/lighthouse` against Lighthouse 12.8 (mobile, headless Chromium), by `tests/lighthouse.rs`:
//!
//! | rule | Lighthouse audit | agree | ours only | Lighthouse only | false positives |
//! |---|---|---|---|---|---|
//! | `uses-optimized-images` | `uses-optimized-images` | 5 | 0 | 0 | 0 |
//! | `modern-image-formats` | `modern-image-formats` | 16 | 0 | 6 | 0 |
//! | `uses-responsive-images` | `uses-responsive-images` | 24 | 0 | 0 | 0 |
//! | `unsized-images` | `unsized-images` | 6 | 0 | 0 | 0 |
//! | `image-aspect-ratio` | `image-aspect-ratio` | 2 | 0 | 0 | 0 |
//! | `offscreen-images` | `offscreen-images` (its measurement on Chromium's layout, before its timing filter) | 4 | 0 | 1 | 0 |
//! | `lcp-lazy-loaded` | `lcp-lazy-loaded` | 1 | 0 | 0 | 0 |
//! | `lcp-fetchpriority` | `lcp-discovery-insight` | 7 | 0 | 0 | 0 |
//! | `font-display` | `font-display-insight` | 6 | 0 | 0 | 0 |
//! | our own rules (`font-format` 2, `image-size` 2, `too-many-font-files` 4) | none | 0 | 8 | 0 | 0 |
//! | **all** | | **71** | **8** | **7** | **0** |
//!
//! 91% of Lighthouse's findings in these rules are ours too.
//! <!-- end of agreement -->
//!
//! # Ceilings and quarantines: `policy gate`
//!
//! "Did this capability make everything else heavier?" `policy gate policies/project.policy`
//! measures each line of a `ceilings` stanza (the JS every page of a front-end build loads, the largest route,
//! a binary and its code section, the crates of a package's default build, a glob of files), prints
//! measured, ceiling and headroom left, and exits 1 over a ceiling; `--ratchet` lowers a ceiling
//! toward `measured × (1 + headroom)` when the measurement drops, rewriting the file in place, and
//! never raises one. A `quarantine` stanza keeps a heavy crate out of a package's default build,
//! printing the chain that pulls it in (as `cargo tree -i` would) when one does. The project gates
//! itself in CI with `policies/project.policy`.
