//! Model servers that may be running on this machine without any configuration: llama.cpp's
//! server on its default port and Ollama on its. The first-run screen offers whichever
//! answers, with the model it serves.

use super::http::client;
use crate::config::ProviderKind;
use std::time::Duration;

/// How long each server gets to answer: a local server answers in milliseconds or not at all.
const ASK_TIMEOUT: Duration = Duration::from_millis(400);

/// A server found answering on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalServer {
    /// What it is, in words (`llama.cpp server`, `Ollama`).
    pub name: &'static str,
    pub kind: ProviderKind,
    /// The base URL a profile would use.
    pub base_url: String,
    /// The first model it lists, if it lists any.
    pub model: Option<String>,
}

impl LocalServer {
    /// A config file that uses this server. It leaves the context window out, and for
    /// llama.cpp's server the model too: tern asks the server for both at each start, so
    /// the config stays right when the server is started again with another model or `-c`.
    /// Ollama serves many models, so the one found is written down as the one to use.
    pub fn config(&self) -> String {
        let model = match (self.kind, &self.model) {
            (ProviderKind::Ollama, Some(model)) => format!("model = \"{model}\"\n"),
            _ => String::new(),
        };
        format!(
            "[models]\nprovider = \"local\"\n\n[providers.local]\nkind = \"{}\"\nbase_url = \
             \"{}\"\n{model}# The context window (and any model not named here) is asked of the \
             server at each start;\n# write context_window = N to fix it instead.\n",
            self.kind.as_str(),
            self.base_url
        )
    }
}

/// The servers looked for, each on its default port: its name, kind and the base URL a
/// profile would use.
pub const LOOKED_FOR: [(&str, ProviderKind, &str); 2] = [
    (
        "llama.cpp server",
        ProviderKind::OpenAi,
        "http://127.0.0.1:8080/v1",
    ),
    ("Ollama", ProviderKind::Ollama, "http://127.0.0.1:11434"),
];

/// The servers answering on their default ports (`127.0.0.1:8080` for llama.cpp's
/// OpenAI-compatible server, `127.0.0.1:11434` for Ollama), asked at the same time.
pub async fn find_local_servers() -> Vec<LocalServer> {
    let llama_cpp = LOOKED_FOR[0].2.trim_end_matches("/v1");
    find_on(llama_cpp, LOOKED_FOR[1].2).await
}

/// [`find_local_servers`] on other addresses, for tests.
pub async fn find_on(llama_cpp: &str, ollama: &str) -> Vec<LocalServer> {
    let llama = ask(format!("{llama_cpp}/v1/models"), |body| {
        body.get("data")?
            .get(0)?
            .get("id")?
            .as_str()
            .map(str::to_owned)
    });
    let ollama_models = ask(format!("{ollama}/api/tags"), |body| {
        body.get("models")?
            .get(0)?
            .get("name")?
            .as_str()
            .map(str::to_owned)
    });
    let (llama, ollama_models) = tokio::join!(llama, ollama_models);
    let mut found = Vec::new();
    if let Some(model) = llama {
        found.push(LocalServer {
            name: LOOKED_FOR[0].0,
            kind: ProviderKind::OpenAi,
            base_url: format!("{llama_cpp}/v1"),
            model,
        });
    }
    if let Some(model) = ollama_models {
        found.push(LocalServer {
            name: LOOKED_FOR[1].0,
            kind: ProviderKind::Ollama,
            base_url: ollama.to_owned(),
            model,
        });
    }
    found
}

/// `Some(first model)` when `url` answers with JSON within the timeout, `None` when it does
/// not answer.
async fn ask(
    url: String,
    first_model: impl Fn(&serde_json::Value) -> Option<String>,
) -> Option<Option<String>> {
    let client = client(&url).ok()?;
    let reply = client.get(&url).timeout(ASK_TIMEOUT).send().await.ok()?;
    if !reply.status().is_success() {
        return None;
    }
    let body: serde_json::Value = reply.json().await.ok()?;
    Some(first_model(&body))
}
