//! Provider profiles: the three built in from the ecosystem's conventional environment
//! variables, the rules for base URLs, and when a profile needs an API key.
//!
//! A key is required by Anthropic, and by OpenAI-compatible servers unless they run on this
//! machine or the local network (llama.cpp, vLLM and Ollama's `/v1` serve without one). The
//! check happens when a profile is used, not at load, so a missing key for a provider nobody
//! asked for never blocks start-up.
//!
//! The limits of a profile are written or assumed. OpenAI's own API and Anthropic's have
//! known models, so their built-in figures stand; any other OpenAI-compatible server and
//! Ollama can say which model they serve and how large their window is (`llm::served`), so
//! their figures are only assumed until the server is asked. An output limit nobody wrote is
//! a share of the window ([`fitted_output`]), so a small window never makes the default
//! output limit too large for it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::env::Environment;
use super::error::ConfigError;
use super::settings::{ProviderKind, ProviderProfile, Written};

/// Every kind, for "accepted values" messages.
pub(crate) const KINDS: &str = "\"anthropic\", \"openai\" or \"ollama\"";

/// Context window assumed for a profile that does not set one and whose server has not said.
pub(crate) const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// The largest output limit tern assumes for a profile that does not set one; smaller
/// windows get a share of the window instead ([`fitted_output`]).
pub(crate) const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;
/// The share of the window a reply may take when nobody wrote an output limit: a quarter,
/// which leaves the prompt the three quarters compaction keeps it under.
const OUTPUT_SHARE: u64 = 4;
/// The model name a local server's profile uses until the server says which model it serves.
pub(crate) const SERVED_MODEL_PLACEHOLDER: &str = "local-model";

/// The output limit for a window of `window` tokens when nobody wrote one: `cap`, or a
/// quarter of the window when that is less (never zero).
pub fn fitted_output(cap: u32, window: u64) -> u32 {
    let share = u32::try_from(window / OUTPUT_SHARE).unwrap_or(u32::MAX);
    cap.min(share).max(1)
}

impl ProviderKind {
    /// Parses the `kind` value of a profile.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "anthropic" => Some(Self::Anthropic),
            "openai" => Some(Self::OpenAi),
            "ollama" => Some(Self::Ollama),
            _ => None,
        }
    }

    /// The vendor's public endpoint, used when a file profile gives no `base_url`.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Anthropic => "https://api.anthropic.com",
            Self::OpenAi => "https://api.openai.com/v1",
            Self::Ollama => "http://127.0.0.1:11434",
        }
    }

    /// The conventional key variable for the vendor's public endpoint.
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            Self::Anthropic => Some("ANTHROPIC_API_KEY"),
            Self::OpenAi => Some("OPENAI_API_KEY"),
            Self::Ollama => None,
        }
    }
}

impl ProviderProfile {
    /// Whether calls to this profile need an API key.
    pub fn needs_key(&self) -> bool {
        match self.kind {
            ProviderKind::Anthropic => true,
            ProviderKind::OpenAi => !self.is_local(),
            ProviderKind::Ollama => false,
        }
    }

    /// Whether the base URL points at this machine or a private network.
    pub fn is_local(&self) -> bool {
        url_host(&self.base_url).is_some_and(is_local_host)
    }

    /// Whether the profile's server can be asked which model it serves and how large its
    /// window is: Ollama, and OpenAI-compatible servers other than OpenAI itself (llama.cpp,
    /// vLLM, LM Studio, Ollama's `/v1`, gateways that list their models' windows).
    pub fn asks_server(&self) -> bool {
        asks_server(self.kind, &self.base_url)
    }

    /// The output limit to ask for when the window is `window` tokens: the one written when
    /// it fits the window, else the default share of it. (Only a written window can make a
    /// written limit an error; a window the server says or tern assumes just lowers it.)
    pub fn output_for(&self, window: u64) -> u32 {
        let fits = u64::from(self.max_output_tokens) < window;
        let keep = if self.written.max_output_tokens {
            fits
        } else {
            window == self.context_window
        };
        if keep {
            self.max_output_tokens
        } else {
            fitted_output(DEFAULT_MAX_OUTPUT_TOKENS, window)
        }
    }

    /// Checks that the key this profile needs is there; the error names the variable to
    /// set. Call it when the profile is about to be used, not at load.
    pub fn require_key(&self) -> Result<(), ConfigError> {
        if self.api_key.is_some() || !self.needs_key() {
            return Ok(());
        }
        Err(match &self.api_key_env {
            Some(env) => ConfigError::MissingKey {
                profile: self.name.clone(),
                env: env.clone(),
            },
            None => ConfigError::NoKeyEnv {
                profile: self.name.clone(),
            },
        })
    }
}

/// The profiles available without a config file, configured from the environment.
pub(crate) fn builtin_profiles(
    env: &Environment,
) -> Result<BTreeMap<String, ProviderProfile>, ConfigError> {
    // The value is shown redacted: a rejected URL may hold a password or a key.
    let from_env = |var: &str, value: &Option<String>, default: &str, key_var: &str| match value {
        Some(url) => check_base_url(url).map_err(|bad| ConfigError::InvalidEnv {
            var: var.to_owned(),
            problem: format!(
                "is `{}`, which {}",
                redact_url(url),
                bad.problem(Some(key_var))
            ),
        }),
        None => Ok(default.to_owned()),
    };
    let anthropic_url = from_env(
        "ANTHROPIC_BASE_URL",
        &env.anthropic_base_url,
        ProviderKind::Anthropic.default_base_url(),
        "ANTHROPIC_API_KEY",
    )?;
    let anthropic = ProviderProfile {
        name: "anthropic".to_owned(),
        kind: ProviderKind::Anthropic,
        base_url: anthropic_url.clone(),
        api_key_env: Some("ANTHROPIC_API_KEY".to_owned()),
        api_key: env.anthropic_api_key.clone(),
        default_model: "claude-sonnet-4-5".to_owned(),
        context_window: 200_000,
        max_output_tokens: 32_000,
        images: !asks_server(ProviderKind::Anthropic, &anthropic_url),
        written: Written::default(),
    };
    let openai_url = from_env(
        "OPENAI_BASE_URL",
        &env.openai_base_url,
        ProviderKind::OpenAi.default_base_url(),
        "OPENAI_API_KEY",
    )?;
    // gpt-4.1's figures hold at OpenAI only; another server says its own (until it does,
    // the figures any profile assumes).
    let (context_window, max_output_tokens) = if is_official_openai(&openai_url) {
        (1_047_576, 32_768)
    } else {
        (DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT_TOKENS)
    };
    let openai = ProviderProfile {
        name: "openai".to_owned(),
        kind: ProviderKind::OpenAi,
        base_url: openai_url.clone(),
        api_key_env: Some("OPENAI_API_KEY".to_owned()),
        api_key: env.openai_api_key.clone(),
        default_model: "gpt-4.1".to_owned(),
        context_window,
        max_output_tokens,
        images: !asks_server(ProviderKind::OpenAi, &openai_url),
        written: Written::default(),
    };
    let ollama_url = match &env.ollama_host {
        Some(host) => ollama_base_url(host).map_err(|problem| ConfigError::InvalidEnv {
            var: "OLLAMA_HOST".to_owned(),
            problem: format!("is `{}`, which {problem}", redact_url(host)),
        })?,
        None => ProviderKind::Ollama.default_base_url().to_owned(),
    };
    let ollama = ProviderProfile {
        name: "ollama".to_owned(),
        kind: ProviderKind::Ollama,
        base_url: ollama_url,
        api_key_env: None,
        api_key: None,
        default_model: "llama3.2".to_owned(),
        context_window: 32_768,
        max_output_tokens: 8192,
        images: false,
        written: Written::default(),
    };
    Ok([anthropic, openai, ollama]
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect())
}

/// Which built-in profile the environment asks for, in order of preference: a key for
/// Anthropic, a key (or a server on this machine) for OpenAI, a host for Ollama.
pub(crate) fn env_default_profile(
    env: &Environment,
    profiles: &BTreeMap<String, ProviderProfile>,
) -> Option<&'static str> {
    let openai_local = profiles
        .get("openai")
        .is_some_and(|p| env.openai_base_url.is_some() && p.is_local());
    if env.anthropic_api_key.is_some() {
        Some("anthropic")
    } else if env.openai_api_key.is_some() || openai_local {
        Some("openai")
    } else if env.ollama_host.is_some() {
        Some("ollama")
    } else {
        None
    }
}

/// The built-in profiles the environment sets up: a key or a base URL for Anthropic and for
/// OpenAI, a host for Ollama. The others still exist (`--provider ollama` uses one), but
/// nobody asked for them, so `tern doctor` does not try them.
pub(crate) fn env_configured(env: &Environment) -> impl Iterator<Item = &'static str> {
    [
        (
            "anthropic",
            env.anthropic_api_key.is_some() || env.anthropic_base_url.is_some(),
        ),
        (
            "openai",
            env.openai_api_key.is_some() || env.openai_base_url.is_some(),
        ),
        ("ollama", env.ollama_host.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
}

/// Why a base URL was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadBaseUrl {
    /// Not an absolute http(s) URL with a host.
    NotHttp,
    /// It carries a `user:password@` part.
    Credentials,
    /// It has a query string or a fragment.
    Query,
}

impl BadBaseUrl {
    /// Completes the sentence "the value …". `key_home` says where a key belongs instead of
    /// the URL (`None` for a server that takes no key); the value itself is never included.
    pub(crate) fn problem(self, key_home: Option<&str>) -> String {
        let instead =
            key_home.map_or_else(String::new, |home| format!(" and put the key in {home}"));
        match self {
            Self::NotHttp => "is not an http:// or https:// URL with a host \
                              (like \"https://api.anthropic.com\" or \"http://127.0.0.1:8080/v1\")"
                .to_owned(),
            Self::Credentials => format!(
                "contains a user name or password (`user:password@`), which would be shown by \
                 `tern doctor` and in error messages; remove that part{instead}"
            ),
            Self::Query => {
                let instead = key_home.map_or_else(String::new, |home| {
                    format!("; a key goes in {home} instead")
                });
                format!(
                    "has a query string or fragment (`?…` or `#…`), but tern appends the API's \
                     paths to the base URL, so it must end with its path; remove that part{instead}"
                )
            }
        }
    }
}

/// Checks that `url` is an absolute http(s) URL with a host and nothing secret or in the way
/// of the paths appended to it (no user info, query or fragment), and drops trailing slashes
/// so endpoint paths can be appended.
pub(crate) fn check_base_url(url: &str) -> Result<String, BadBaseUrl> {
    let url = url.trim().trim_end_matches('/');
    let lower = url.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &url[7..]
    } else if lower.starts_with("https://") {
        &url[8..]
    } else {
        return Err(BadBaseUrl::NotHttp);
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(BadBaseUrl::Credentials);
    }
    if rest.contains(['?', '#']) {
        return Err(BadBaseUrl::Query);
    }
    let host_ok = url_host(url).is_some_and(|h| !h.is_empty());
    if !host_ok || authority.starts_with(':') || url.chars().any(char::is_whitespace) {
        return Err(BadBaseUrl::NotHttp);
    }
    Ok(url.to_owned())
}

/// `url` (or a bare `host:port`) with what may be secret replaced by `…`: the user info and
/// any query or fragment. What remains says which server was meant.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("…@{host}"),
        None => authority.to_owned(),
    };
    // `?` and `#` are ASCII, so the cut is on a character boundary.
    let tail = match tail.find(['?', '#']) {
        Some(at) => format!("{}…", &tail[..=at]),
        None => tail.to_owned(),
    };
    format!("{scheme}{authority}{tail}")
}

/// Turns `OLLAMA_HOST` into a base URL the way Ollama's own client does: `host:port`, a bare
/// host (port 11434), or a full URL; `0.0.0.0` (a common bind address) means this machine.
fn ollama_base_url(host: &str) -> Result<String, String> {
    let host = host.trim();
    // Ollama takes no key, so a credential in the host has nowhere else to go.
    let checked = |url: &str| check_base_url(url).map_err(|bad| bad.problem(None));
    if host.contains("://") {
        return checked(host);
    }
    let hostport = host.split('/').next().unwrap_or_default();
    let with_port = if hostport.is_empty() {
        "127.0.0.1:11434".to_owned()
    } else if let Some(bracketed) = hostport.strip_prefix('[') {
        // `[::1]` or `[::1]:11434`
        match bracketed.split_once(']') {
            Some((_, "")) => format!("{hostport}:11434"),
            Some(_) => hostport.to_owned(),
            None => return Err("has an unclosed `[` in its IPv6 address".to_owned()),
        }
    } else {
        match hostport.matches(':').count() {
            0 => format!("{hostport}:11434"),
            1 if hostport.starts_with(':') => format!("127.0.0.1{hostport}"),
            1 => hostport.to_owned(),
            _ => format!("[{hostport}]:11434"),
        }
    };
    let with_port = with_port.replacen("0.0.0.0", "127.0.0.1", 1);
    checked(&format!("http://{with_port}"))
}

/// Whether `base_url` is OpenAI's own API, whose model list says nothing about windows.
pub(crate) fn is_official_openai(base_url: &str) -> bool {
    url_host(base_url).is_some_and(|host| host.eq_ignore_ascii_case("api.openai.com"))
}

/// Whether a profile of `kind` at `base_url` can be asked for its model and window: Ollama,
/// every OpenAI-compatible server but OpenAI's own, and an Anthropic-compatible server on
/// this machine or the local network (llama.cpp serves that wire too); Anthropic's own API
/// and remote gateways of its wire say nothing about windows.
pub(crate) fn asks_server(kind: ProviderKind, base_url: &str) -> bool {
    match kind {
        ProviderKind::Ollama => true,
        ProviderKind::OpenAi => !is_official_openai(base_url),
        ProviderKind::Anthropic => url_host(base_url).is_some_and(is_local_host),
    }
}

/// Whether a profile of `kind` at `base_url` may leave out `model`: a server on this machine
/// or the local network that says which model it serves. A remote gateway lists many, and
/// picking one for the person would be a guess. An Anthropic-compatible server is asked for
/// its window only: the model named stays.
pub(crate) fn may_learn_model(kind: ProviderKind, base_url: &str) -> bool {
    kind != ProviderKind::Anthropic
        && asks_server(kind, base_url)
        && url_host(base_url).is_some_and(is_local_host)
}

/// The host of an http(s) URL, without user info, port or IPv6 brackets.
fn url_host(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(bracketed) = host_port.strip_prefix('[') {
        return bracketed.split_once(']').map(|(h, _)| h);
    }
    Some(host_port.split(':').next().unwrap_or(host_port))
}

/// Loopback, private, link-local or unspecified addresses, and `localhost` names.
fn is_local_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => {
            ip.is_loopback() || ip.is_private() || ip.is_link_local() || ip.is_unspecified()
        }
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_unique_local()
                || ip.is_unicast_link_local()
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_sent_to_the_vendors_apis_and_to_others_only_when_the_config_says() {
        let load = |text: &str, pairs: &[(&str, &str)]| {
            let env = Environment::from_pairs(pairs.iter().copied());
            crate::config::load_from_str(text, std::path::Path::new("/c.toml"), &env)
                .expect("a valid config")
        };
        let builtin = load("", &[]);
        let takes = |config: &crate::config::Config, name: &str| {
            config.provider(name).expect("the profile").images
        };
        assert!(takes(&builtin, "anthropic"));
        assert!(takes(&builtin, "openai"));
        assert!(!takes(&builtin, "ollama"));
        let local = load(
            "[providers.box]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
             [providers.vision]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
             images = true\n[providers.anthropic]\nimages = false\n",
            &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")],
        );
        assert!(
            !takes(&local, "box"),
            "a local server takes none unless told"
        );
        assert!(takes(&local, "vision"));
        assert!(!takes(&local, "anthropic"), "as written");
        let proxied = load("", &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")]);
        assert!(
            !takes(&proxied, "anthropic"),
            "the vendor's wire on this machine"
        );
    }

    #[test]
    fn base_urls() {
        assert_eq!(
            check_base_url("https://api.x.com/v1/").as_deref(),
            Ok("https://api.x.com/v1")
        );
        assert_eq!(
            check_base_url("HTTP://127.0.0.1:8080").as_deref(),
            Ok("HTTP://127.0.0.1:8080")
        );
        for bad in [
            "api.x.com",
            "ftp://x",
            "http://",
            "http://:80",
            "https://a b",
            "http:///v1",
        ] {
            assert_eq!(check_base_url(bad), Err(BadBaseUrl::NotHttp), "{bad}");
        }
        for (bad, why) in [
            ("https://u:p@x.com/v1", BadBaseUrl::Credentials),
            ("http://@x.com", BadBaseUrl::Credentials),
            ("https://x.com/v1?k=v", BadBaseUrl::Query),
            ("https://x.com?", BadBaseUrl::Query),
            ("https://x.com/v1#top", BadBaseUrl::Query),
        ] {
            assert_eq!(check_base_url(bad), Err(why), "{bad}");
        }
        assert_eq!(
            check_base_url("https://x.com/@team/v1").as_deref(),
            Ok("https://x.com/@team/v1")
        );
    }

    #[test]
    fn redacted_urls_keep_the_server_and_drop_secrets() {
        for (url, shown) in [
            ("https://api.x.com/v1", "https://api.x.com/v1"),
            ("https://u:p@api.x.com/v1", "https://…@api.x.com/v1"),
            ("https://a@b@api.x.com", "https://…@api.x.com"),
            ("https://api.x.com/v1?key=s&x=y", "https://api.x.com/v1?…"),
            ("https://api.x.com#s", "https://api.x.com#…"),
            ("u:p@gpu-box:11434/x?t=s", "…@gpu-box:11434/x?…"),
            ("https://x/@team", "https://x/@team"),
            ("localhost:8080", "localhost:8080"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn ollama_hosts_like_ollama_reads_them() {
        let url = |h| ollama_base_url(h).unwrap();
        assert_eq!(url("127.0.0.1:11434"), "http://127.0.0.1:11434");
        assert_eq!(url("gpu-box"), "http://gpu-box:11434");
        assert_eq!(url("0.0.0.0"), "http://127.0.0.1:11434");
        assert_eq!(url(":9000"), "http://127.0.0.1:9000");
        assert_eq!(url("[::1]"), "http://[::1]:11434");
        assert_eq!(url("::1"), "http://[::1]:11434");
        assert_eq!(
            url("https://ollama.example.com"),
            "https://ollama.example.com"
        );
    }

    #[test]
    fn local_hosts() {
        let host = |u| url_host(u).is_some_and(is_local_host);
        assert!(host("http://127.0.0.1:8080/v1"));
        assert!(host("http://localhost:8080"));
        assert!(host("http://192.168.1.20:8000/v1"));
        assert!(host("http://[::1]:8080"));
        assert!(host("http://user:pw@10.0.0.2/v1"));
        assert!(!host("https://openrouter.ai/api/v1"));
        assert!(!host("https://8.8.8.8/v1"));
    }
}
