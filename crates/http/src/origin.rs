//! Whether a request came from another site: the check every route that starts a session by
//! setting cookies makes besides its CSRF token (login CSRF: another site must not sign a
//! visitor in to an account of its own).
//!
//! Browsers say where a request comes from in two headers no page can set: `Sec-Fetch-Site`
//! (`same-origin`, `same-site`, `cross-site`, or `none` for a typed address or a bookmark) and
//! `Origin` (sent with every cross-origin request and with every POST). `Sec-Fetch-Site`, where
//! a browser sends it, decides: anything but `same-origin` or `none` is refused. Without it,
//! an `Origin` naming another host is refused. `Origin: null` alone decides nothing: our pages
//! send no referrer (`Referrer-Policy: no-referrer`), and a browser then sends `null` for its
//! own same-origin form posts too. A request with neither header (an older browser, a command
//! line client) is judged by its CSRF token alone.

use actix_web::HttpRequest;
use actix_web::http::header;

/// The `Sec-Fetch-Site` header.
const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// Whether the browser that sent `req` says it came from another origin.
pub fn is_cross_origin(req: &HttpRequest) -> bool {
    if let Some(site) = req.headers().get(SEC_FETCH_SITE) {
        return !matches!(site.to_str(), Ok("same-origin" | "none"));
    }
    match req.headers().get(header::ORIGIN).map(|v| v.to_str()) {
        None | Some(Ok("null")) => false,
        Some(Ok(origin)) => !same_authority(origin, req.connection_info().host()),
        Some(Err(_)) => true,
    }
}

/// Whether `origin` (`scheme://host[:port]`) names the host (`host[:port]`, as the request's
/// `Host` header gives it) the request was sent to.
fn same_authority(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        // `null`, or anything else that is not an origin.
        return false;
    };
    let default_port = match scheme {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    let strip = |a: &str| a.strip_suffix(default_port).map(str::to_owned).unwrap_or_else(|| a.to_owned());
    strip(&authority.to_ascii_lowercase()) == strip(&host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn another_origin_in_either_header_is_cross_site() {
        let cases: [(&[(&str, &str)], bool); 12] = [
            (&[], false),
            (&[("sec-fetch-site", "same-origin")], false),
            (&[("sec-fetch-site", "none")], false),
            (&[("sec-fetch-site", "cross-site")], true),
            (&[("sec-fetch-site", "same-site")], true),
            (&[("origin", "http://agentry.test")], false),
            (&[("origin", "http://agentry.test:80")], false),
            (&[("origin", "https://evil.example")], true),
            (&[("origin", "http://agentry.test"), ("sec-fetch-site", "cross-site")], true),
            // A page without a referrer posts its own form with `Origin: null`.
            (&[("origin", "null"), ("sec-fetch-site", "same-origin")], false),
            (&[("origin", "null"), ("sec-fetch-site", "cross-site")], true),
            (&[("origin", "null")], false),
        ];
        for (headers, cross) in cases {
            let mut request = TestRequest::post().uri("/magic-link").insert_header(("host", "agentry.test"));
            for (name, value) in headers {
                request = request.insert_header((*name, *value));
            }
            assert_eq!(is_cross_origin(&request.to_http_request()), cross, "{headers:?}");
        }
    }

    #[test]
    fn ports_and_case_are_compared_as_browsers_send_them() {
        assert!(same_authority("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(!same_authority("http://127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(same_authority("https://Agentry.Example", "agentry.example:443"));
        assert!(!same_authority("ftp://agentry.example", "agentry.example"));
        assert!(!same_authority("agentry.example", "agentry.example"));
    }
}
