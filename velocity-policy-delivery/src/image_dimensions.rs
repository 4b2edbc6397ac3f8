//! A tower layer that gives `<img>` elements of HTML responses the `width` and `height` they
//! lack, from a manifest of image sizes built at startup (feature `html-dimensions`).
//!
//! An image without intrinsic dimensions makes the page shift when it loads (Lighthouse's
//! `unsized-images`; `policy assets` reports it at build time). This layer stops the shift for
//! pages a service already serves, before their templates are fixed:
//!
//! - [`ImageManifest::scan`] reads the header of every PNG, JPEG, GIF, WebP and AVIF file under
//!   a directory once, at startup, and maps its URL path to its size.
//! - For a response whose `content-type` is `text/html`, [`ImageDimensionsLayer`] rewrites the
//!   body as it streams through (with `lol_html`, chunk by chunk, never the whole document in
//!   memory): an `<img>` whose `src` is in the manifest and that has neither `width` nor
//!   `height` gets both; one that has only one of them gets the other, from the file's ratio.
//!   Every other element and byte passes unchanged.
//! - `src` is resolved like a browser would, against the request's path; `http:`, `//host` and
//!   `data:` sources are left alone.
//!
//! What passes through untouched, whole: responses that are not `text/html`; compressed ones
//! (`content-encoding` other than `identity`: put this layer *inside* a compression layer, that
//! is `.layer(ImageDimensionsLayer::new(manifest)).layer(CompressionLayer::new())`, so it sees
//! the HTML before it is compressed); `HEAD` requests; statuses without a body to rewrite
//! (1xx, 204, 206, 304). A rewritten response loses `content-length` (its length changes) and
//! `accept-ranges`, and a strong `etag` becomes weak.
//!
//! Memory is bounded: the rewriter holds only an unfinished tag between chunks. A single tag
//! larger than [`ImageDimensionsLayer::max_buffered`] (1 MiB by default; a `data:` URL in an
//! attribute can be that long) stops the rewriting: the bytes held so far and the rest of the
//! body are passed on unchanged, so the page is complete, only not rewritten after that point.
//!
//! ```
//! use axum::{Router, routing::get, response::Html};
//! use velocity_policy_delivery::image_dimensions::{ImageDimensionsLayer, ImageManifest};
//!
//! # fn main() -> std::io::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("image-dimensions-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! // At startup: the sizes of the images the service serves under `/static`.
//! let mut manifest = ImageManifest::scan(&dir, "/static")?;
//! manifest.insert("/static/hero.webp", 1200, 800);
//!
//! let app: Router = Router::new()
//!     .route("/", get(|| async { Html(r#"<img src="/static/hero.webp" alt="">"#) }))
//!     .layer(ImageDimensionsLayer::new(manifest));
//! // `GET /` now answers `<img src="/static/hero.webp" alt="" width="1200" height="800">`.
//! # let _ = app;
//! # Ok(())
//! # }
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io::{self, Read};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ETAG};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};

use lol_html::send::{Element, ElementContentHandlers, HtmlRewriter, Settings};
use lol_html::{HandlerResult, MemorySettings, OutputSink, Selector};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::html::dimension;
use crate::site::{Reference, percent_decode};

/// The default for [`ImageDimensionsLayer::max_buffered`]: 1 MiB.
pub const DEFAULT_MAX_BUFFERED: usize = 1024 * 1024;

/// Directories deeper than this below the scanned one are not read.
const MAX_DEPTH: usize = 32;

/// Bytes read from the start of each file to find its size (enough for every supported
/// header; a JPEG with large metadata before its frame header is read on to the frame).
const HEADER_BYTES: u64 = 256 * 1024;

/// Image sizes by URL path (`/static/hero.webp` → 1200×800).
#[derive(Debug, Clone, Default)]
pub struct ImageManifest {
    images: HashMap<String, (u32, u32)>,
}

impl ImageManifest {
    /// An empty manifest.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads every image under `dir` (recursively, not following links to directories) and
    /// maps `url_prefix` + its path below `dir` to its size: with prefix `/static`,
    /// `dir/img/a.png` is `/static/img/a.png`. Formats come from the files' bytes; files that
    /// are not PNG, JPEG, GIF, WebP or AVIF, or whose header cannot be read, are left out.
    ///
    /// Only `dir` itself failing to be read is an error.
    pub fn scan(dir: impl AsRef<Path>, url_prefix: &str) -> io::Result<Self> {
        let mut manifest = Self::new();
        let prefix = format!("/{}", url_prefix.trim_matches('/'));
        let prefix = prefix.trim_end_matches('/');
        manifest.scan_dir(dir.as_ref(), prefix, 0)?;
        Ok(manifest)
    }

    fn scan_dir(&mut self, dir: &Path, url: &str, depth: usize) -> io::Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) if depth == 0 => return Err(error),
            Err(error) => {
                tracing::debug!(target: "policy", dir = %dir.display(), %error, "image manifest: directory skipped");
                return Ok(());
            }
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let child_url = format!("{url}/{}", name.to_string_lossy());
            let path = entry.path();
            if kind.is_dir() {
                if depth < MAX_DEPTH {
                    self.scan_dir(&path, &child_url, depth + 1)?;
                }
            } else if path.is_file() {
                match image_size(&path) {
                    Some((width, height)) => {
                        self.images.insert(child_url, (width, height));
                    }
                    None => {
                        tracing::trace!(target: "policy", file = %path.display(), "image manifest: not an image");
                    }
                }
            }
        }
        Ok(())
    }

    /// Adds or replaces the size of the image at `url_path` (an absolute path, `/img/a.png`).
    pub fn insert(&mut self, url_path: impl Into<String>, width: u32, height: u32) {
        self.images.insert(url_path.into(), (width, height));
    }

    /// The size of the image at `url_path`.
    #[must_use]
    pub fn get(&self, url_path: &str) -> Option<(u32, u32)> {
        self.images.get(url_path).copied()
    }

    /// How many images it knows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.images.len()
    }

    /// Whether it knows none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }
}

/// The size a web image's header declares; `None` for anything else.
fn image_size(path: &Path) -> Option<(u32, u32)> {
    let mut header = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(HEADER_BYTES)
        .read_to_end(&mut header)
        .ok()?;
    // Header parsers read untrusted offsets: a panic would be one image left out, not a
    // service that fails to start.
    let size = std::panic::catch_unwind(|| imagesize::blob_size(&header))
        .ok()?
        .ok()?;
    match (u32::try_from(size.width), u32::try_from(size.height)) {
        (Ok(width), Ok(height)) if width > 0 && height > 0 => Some((width, height)),
        _ => None,
    }
}

/// A tower layer that fills in the missing `width` and `height` of `<img>` elements in HTML
/// responses. See the [module docs](self).
#[derive(Clone)]
pub struct ImageDimensionsLayer {
    shared: Arc<Shared>,
}

#[derive(Clone)]
struct Shared {
    manifest: ImageManifest,
    selector: Option<Selector>,
    max_buffered: usize,
}

impl fmt::Debug for ImageDimensionsLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageDimensionsLayer")
            .field("images", &self.shared.manifest.len())
            .field("max_buffered", &self.shared.max_buffered)
            .finish()
    }
}

impl ImageDimensionsLayer {
    /// A layer that uses `manifest`.
    #[must_use]
    pub fn new(manifest: ImageManifest) -> Self {
        Self::build(manifest, DEFAULT_MAX_BUFFERED)
    }

    fn build(manifest: ImageManifest, max_buffered: usize) -> Self {
        // `img` always parses; were it ever refused, responses would pass through untouched.
        let selector = "img"
            .parse::<Selector>()
            .map_err(|error| {
                tracing::error!(target: "policy", kind = "image_dimensions", reason = %error, "no `img` selector: responses pass through");
            })
            .ok();
        ImageDimensionsLayer {
            shared: Arc::new(Shared {
                manifest,
                selector,
                max_buffered,
            }),
        }
    }

    /// The most bytes the rewriter may hold for one unfinished tag (and its own state) before it
    /// stops rewriting and passes the rest of the body through unchanged.
    #[must_use]
    pub fn max_buffered(mut self, bytes: usize) -> Self {
        Arc::make_mut(&mut self.shared).max_buffered = bytes;
        self
    }

    /// The manifest it uses.
    #[must_use]
    pub fn manifest(&self) -> &ImageManifest {
        &self.shared.manifest
    }
}

impl<S> Layer<S> for ImageDimensionsLayer {
    type Service = ImageDimensionsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ImageDimensionsService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service [`ImageDimensionsLayer`] makes.
#[derive(Clone)]
pub struct ImageDimensionsService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: fmt::Debug> fmt::Debug for ImageDimensionsService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageDimensionsService")
            .field("inner", &self.inner)
            .field("images", &self.shared.manifest.len())
            .finish()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ImageDimensionsService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Body,
{
    type Response = Response<ImageDimensionsBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The directory relative `src`s are resolved against; `None`: nothing to rewrite.
        let base = (request.method() != Method::HEAD && !self.shared.manifest.is_empty())
            .then(|| base_dir(request.uri().path()));
        ResponseFuture {
            inner: self.inner.call(request),
            base,
            shared: Arc::clone(&self.shared),
        }
    }
}

pin_project! {
    /// The response future of [`ImageDimensionsService`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        base: Option<String>,
        shared: Arc<Shared>,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Body,
{
    type Output = Result<Response<ImageDimensionsBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        let rewrite = match this.base.take() {
            Some(base) if rewritable(&response) => Rewrite::start(this.shared, base),
            _ => None,
        };
        let (mut parts, inner) = response.into_parts();
        if rewrite.is_some() {
            parts.headers.remove(CONTENT_LENGTH);
            parts.headers.remove(ACCEPT_RANGES);
            weaken_etag(&mut parts.headers);
        }
        Poll::Ready(Ok(Response::from_parts(
            parts,
            ImageDimensionsBody {
                inner,
                rewrite: rewrite.map(Box::new),
                trailers: None,
                done: false,
            },
        )))
    }
}

/// An uncompressed HTML response with a body worth rewriting.
fn rewritable<B>(response: &Response<B>) -> bool {
    let status = response.status();
    if status.is_informational()
        || matches!(
            status,
            StatusCode::NO_CONTENT | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED
        )
    {
        return false;
    }
    let headers = response.headers();
    let html = headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/html"));
    let encoded = headers.get_all(CONTENT_ENCODING).iter().any(|value| {
        value
            .to_str()
            .map_or(true, |v| !v.trim().eq_ignore_ascii_case("identity"))
    });
    html && !encoded
}

fn weaken_etag(headers: &mut HeaderMap) {
    let Some(etag) = headers.get(ETAG).and_then(|v| v.to_str().ok()) else {
        return;
    };
    if etag.starts_with("W/") {
        return;
    }
    match HeaderValue::from_str(&format!("W/{etag}")) {
        Ok(weak) => {
            headers.insert(ETAG, weak);
        }
        Err(_) => {
            headers.remove(ETAG);
        }
    }
}

/// The directory of a request path, decoded, ending in `/`: `/blog/post.html` → `/blog/`.
/// Sources are resolved in it; `http:`, `//host` and `data:` ones are left alone.
fn base_dir(path: &str) -> String {
    let decoded = percent_decode(path);
    match decoded.rfind('/') {
        Some(slash) => decoded[..=slash].to_owned(),
        None => "/".to_owned(),
    }
}

/// A `width` or `height` attribute as a size: a positive number of pixels.
fn pixels(value: &str) -> Option<f64> {
    dimension(value).filter(|n| *n > 0.0)
}

/// Gives one `<img>` what it lacks.
fn fill(element: &mut Element<'_, '_>, manifest: &ImageManifest, base: &str) -> HandlerResult {
    let width = element.get_attribute("width");
    let height = element.get_attribute("height");
    if width.is_some() && height.is_some() {
        return Ok(());
    }
    let Some((natural_width, natural_height)) = element
        .get_attribute("src")
        .and_then(|src| Reference::parse(&src))
        .and_then(|src| manifest.get(&src.in_url_dir(base)))
    else {
        return Ok(());
    };
    let ratio = f64::from(natural_height) / f64::from(natural_width);
    match (width, height) {
        (None, None) => {
            element.set_attribute("width", &natural_width.to_string())?;
            element.set_attribute("height", &natural_height.to_string())?;
        }
        (Some(width), None) => {
            if let Some(width) = pixels(&width) {
                let height = (width * ratio).round().max(1.0);
                element.set_attribute("height", &format!("{height}"))?;
            }
        }
        (None, Some(height)) => {
            if let Some(height) = pixels(&height) {
                let width = (height / ratio).round().max(1.0);
                element.set_attribute("width", &format!("{width}"))?;
            }
        }
        (Some(_), Some(_)) => {}
    }
    Ok(())
}

/// Where the rewriter writes; the body takes what is there after each chunk.
struct Sink(Arc<Mutex<BytesMut>>);

impl OutputSink for Sink {
    fn handle_chunk(&mut self, chunk: &[u8]) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(chunk);
    }
}

/// One response's rewriting.
struct Rewrite {
    /// `None` once it has ended, or stopped (the rest passes through).
    rewriter: Option<HtmlRewriter<'static, Sink>>,
    output: Arc<Mutex<BytesMut>>,
}

impl Rewrite {
    fn start(shared: &Arc<Shared>, base: String) -> Option<Rewrite> {
        let selector = shared.selector.as_ref()?;
        let output = Arc::new(Mutex::new(BytesMut::new()));
        let manifest = Arc::clone(shared);
        let handlers = ElementContentHandlers::default()
            .element(move |element: &mut Element<'_, '_>| fill(element, &manifest.manifest, &base));
        let settings = Settings::new_send()
            .append_element_content_handler((Cow::Borrowed(selector), handlers))
            // Start tags do not depend on what a tree builder would decide: never refuse.
            .with_strict(false)
            .with_graceful_bail_out_on_content_handler_error(true)
            .with_memory_settings(
                MemorySettings::new()
                    .with_max_allowed_memory_usage(shared.max_buffered)
                    .with_graceful_bail_out_on_memory_limit_exceeded(true),
            );
        let rewriter = HtmlRewriter::new(settings, Sink(Arc::clone(&output)));
        Some(Rewrite {
            rewriter: Some(rewriter),
            output,
        })
    }

    fn write(&mut self, chunk: &[u8]) {
        match &mut self.rewriter {
            Some(rewriter) => {
                if let Err(error) = rewriter.write(chunk) {
                    // The rewriter has handed its unprocessed input to the sink as it was; the
                    // rest of the body passes through.
                    tracing::warn!(target: "policy", kind = "image_dimensions", reason = %error, "stopped rewriting image dimensions; the rest of the page passes through unchanged");
                    self.rewriter = None;
                }
            }
            None => self.lock().extend_from_slice(chunk),
        }
    }

    fn end(&mut self) {
        if let Some(rewriter) = self.rewriter.take()
            && let Err(error) = rewriter.end()
        {
            tracing::warn!(target: "policy", kind = "image_dimensions", reason = %error, "image dimensions: the end of the page could not be rewritten");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BytesMut> {
        self.output.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_output(&self) -> Option<Bytes> {
        let mut output = self.lock();
        (!output.is_empty()).then(|| output.split().freeze())
    }

    fn has_output(&self) -> bool {
        !self.lock().is_empty()
    }
}

pin_project! {
    /// A response body whose HTML is rewritten as it streams, or passed through untouched.
    pub struct ImageDimensionsBody<B> {
        #[pin]
        inner: B,
        // `None`: passing through.
        rewrite: Option<Box<Rewrite>>,
        trailers: Option<HeaderMap>,
        done: bool,
    }
}

impl<B> fmt::Debug for ImageDimensionsBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageDimensionsBody")
            .field("rewriting", &self.rewrite.is_some())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<B> Body for ImageDimensionsBody<B>
where
    B: Body,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let Some(rewrite) = this.rewrite.as_mut() else {
            let frame = ready!(this.inner.poll_frame(cx));
            return Poll::Ready(frame.map(|frame| {
                frame.map(|frame| frame.map_data(|mut data| data.copy_to_bytes(data.remaining())))
            }));
        };
        loop {
            if let Some(output) = rewrite.take_output() {
                return Poll::Ready(Some(Ok(Frame::data(output))));
            }
            if let Some(trailers) = this.trailers.take() {
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            if *this.done {
                return Poll::Ready(None);
            }
            match ready!(this.inner.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(mut data) => {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            let len = chunk.len();
                            rewrite.write(chunk);
                            data.advance(len);
                        }
                    }
                    Err(frame) => {
                        // Trailers end the body: finish the page, then send them.
                        rewrite.end();
                        *this.trailers = frame.into_trailers().ok();
                        *this.done = true;
                    }
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => {
                    rewrite.end();
                    *this.done = true;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.rewrite {
            None => self.inner.is_end_stream(),
            Some(rewrite) => self.done && self.trailers.is_none() && !rewrite.has_output(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.rewrite {
            None => self.inner.size_hint(),
            // The length changes.
            Some(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_resolve_in_their_directory() {
        assert_eq!(base_dir("/blog/post.html"), "/blog/");
        assert_eq!(base_dir("/blog/"), "/blog/");
        assert_eq!(base_dir("/a%20b/c"), "/a b/");
    }

    #[test]
    fn pixels_read_like_attributes() {
        assert_eq!(pixels("640"), Some(640.0));
        assert_eq!(pixels("640px"), Some(640.0));
        assert_eq!(pixels("50%"), None);
        assert_eq!(pixels("0"), None);
        assert_eq!(pixels("auto"), None);
    }
}
