//! The dashboard served by every node at `GET /ui` (docs/DASHBOARD.md):
//! three files of our own, embedded in the binary, nothing fetched at run
//! time. The page holds no data: it loads without a token and reads the
//! node's JSON endpoints with the token the user gives it.
//!
//! # Rules
//! - The paths are fixed: `/ui` (the page), `/ui/app.js`, `/ui/app.css`;
//!   any other path under `/ui/` is 404 (never 400: it names a missing
//!   asset, not a bad request).
//! - Every asset is sent with [`CSP`], which allows scripts, styles and
//!   fetches from the node's own origin only (no inline script, no
//!   `eval`, no frame), and [`CACHE_CONTROL`]: `no-cache` (a browser
//!   revalidates, so an upgraded node serves its new page at once).

/// The page.
const INDEX_HTML: &str = include_str!("index.html");
/// The page's script.
const APP_JS: &str = include_str!("app.js");
/// The page's style.
const APP_CSS: &str = include_str!("app.css");

/// `Content-Security-Policy` of every asset.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; \
base-uri 'none'";
/// `Cache-Control` of every asset.
pub const CACHE_CONTROL: &str = "no-cache";
/// The path prefix of the assets other than the page.
pub const ASSET_PREFIX: &[u8] = b"/ui/";

/// One of the dashboard's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asset {
    /// `/ui`: the HTML page.
    Page,
    /// `/ui/app.js`.
    Script,
    /// `/ui/app.css`.
    Style,
}

impl Asset {
    /// The asset at `path`, `None` for an unknown one.
    pub fn at(path: &[u8]) -> Option<Asset> {
        match path {
            b"/ui" => Some(Asset::Page),
            b"/ui/app.js" => Some(Asset::Script),
            b"/ui/app.css" => Some(Asset::Style),
            _ => None,
        }
    }

    /// The file's bytes.
    pub fn body(self) -> &'static str {
        match self {
            Asset::Page => INDEX_HTML,
            Asset::Script => APP_JS,
            Asset::Style => APP_CSS,
        }
    }

    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Asset::Page => "text/html; charset=utf-8",
            Asset::Script => "text/javascript; charset=utf-8",
            Asset::Style => "text/css; charset=utf-8",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page names its script and style by their served paths and holds
    /// no inline script or style (the CSP would block them).
    #[test]
    fn page_links_its_assets_and_inlines_nothing() {
        let page = Asset::Page.body();
        assert!(page.contains("<script src=\"/ui/app.js\""));
        assert!(page.contains("href=\"/ui/app.css\""));
        assert_eq!(page.matches("<script").count(), 1);
        assert!(!page.contains("<style"));
        assert!(!page.contains(" style=") && !page.contains(" onclick="));
        // No URL of another origin (the SVG namespace is a name, never fetched).
        for asset in [Asset::Page, Asset::Script, Asset::Style] {
            let body = asset.body().replace("\"http://www.w3.org/2000/svg\"", "");
            assert!(
                !body.contains("http://") && !body.contains("https://"),
                "{asset:?}"
            );
            assert!(
                !body.contains("eval(") && !body.contains("innerHTML"),
                "{asset:?}"
            );
        }
    }

    /// Only the three fixed paths are assets.
    #[test]
    fn fixed_paths() {
        assert_eq!(Asset::at(b"/ui"), Some(Asset::Page));
        assert_eq!(Asset::at(b"/ui/app.js"), Some(Asset::Script));
        assert_eq!(Asset::at(b"/ui/app.css"), Some(Asset::Style));
        for p in [
            &b"/ui/"[..],
            b"/ui/x.js",
            b"/ui/app.js/",
            b"/ui/../v0/cluster",
        ] {
            assert_eq!(Asset::at(p), None);
        }
    }
}
