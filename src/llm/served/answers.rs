//! Reading what model servers say about themselves: pure functions over the JSON bodies of
//! their model and property endpoints, each written against the shape the server documents.
//!
//! - llama.cpp's server: `GET /props` has the window a request may use in
//!   `default_generation_settings.n_ctx` (the slot's context; some builds also put `n_ctx` at
//!   the top). Its `/v1/models` entry carries `meta.n_ctx_train`, the size the model was
//!   trained for, which is not the window the server was started with; some builds add
//!   `meta.n_ctx`, which is.
//! - vLLM: each `/v1/models` entry has `max_model_len`.
//! - LM Studio: `GET /api/v0/models` lists every model with `max_context_length` (the most
//!   the model takes) and, once loaded, `loaded_context_length` (what it was loaded with).
//! - Ollama: `POST /api/show` has the model's `model_info["<arch>.context_length"]`, and in
//!   `parameters` (text, one `name value` per line) a `num_ctx` when the Modelfile sets one.
//! - Gateways such as OpenRouter list a `context_length` per model.

use serde_json::Value;

/// A window and which answer said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Window {
    pub tokens: u64,
    pub said_by: String,
}

impl Window {
    fn new(tokens: u64, said_by: impl Into<String>) -> Option<Self> {
        (tokens > 0).then(|| Self {
            tokens,
            said_by: said_by.into(),
        })
    }
}

/// The entries of an OpenAI-style model list (`{"data": [{"id": …}, …]}`).
pub(super) fn model_entries(body: &Value) -> Vec<&Value> {
    body.get("data")
        .and_then(Value::as_array)
        .map(|data| data.iter().filter(|entry| id(entry).is_some()).collect())
        .unwrap_or_default()
}

/// An entry's model id.
pub(super) fn id(entry: &Value) -> Option<&str> {
    entry.get("id").and_then(Value::as_str)
}

/// The entry for `model`.
pub(super) fn entry_for<'a>(entries: &[&'a Value], model: &str) -> Option<&'a Value> {
    entries
        .iter()
        .copied()
        .find(|entry| id(entry) == Some(model))
}

/// The window an OpenAI-style model list entry states: vLLM's `max_model_len`, a llama.cpp
/// build's `meta.n_ctx`, a loaded model's `loaded_context_length`, or a gateway's
/// `context_length`. (`meta.n_ctx_train` is not one: it is what the model was trained for.)
pub(super) fn entry_window(entry: &Value) -> Option<Window> {
    let number = |value: Option<&Value>| value.and_then(Value::as_u64).filter(|n| *n > 0);
    if let Some(n) = number(entry.get("max_model_len")) {
        return Window::new(n, "vLLM /v1/models max_model_len");
    }
    if let Some(n) = number(entry.get("meta").and_then(|meta| meta.get("n_ctx"))) {
        return Window::new(n, "llama.cpp /v1/models meta.n_ctx");
    }
    if let Some(n) = number(entry.get("loaded_context_length")) {
        return Window::new(n, "/v1/models loaded_context_length");
    }
    if let Some(n) = number(entry.get("context_length")) {
        return Window::new(n, "/v1/models context_length");
    }
    None
}

/// The window llama.cpp's `GET /props` states: the default slot's `n_ctx`, or a top-level
/// `n_ctx`.
pub(super) fn props_window(body: &Value) -> Option<Window> {
    let slot = body
        .get("default_generation_settings")
        .and_then(|settings| settings.get("n_ctx"))
        .and_then(Value::as_u64);
    let top = body.get("n_ctx").and_then(Value::as_u64);
    Window::new(slot.or(top)?, "llama.cpp /props")
}

/// One model as LM Studio's `GET /api/v0/models` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LmStudioModel {
    pub id: String,
    /// `llm`, `vlm` or `embeddings`.
    pub kind: String,
    pub loaded: bool,
    pub window: Option<Window>,
}

/// LM Studio's model list. A loaded model's window is the one it was loaded with; one not
/// loaded yet says only the most it takes, which is what tern can know before it is loaded.
pub(super) fn lm_studio_models(body: &Value) -> Vec<LmStudioModel> {
    model_entries(body)
        .into_iter()
        .filter_map(|entry| {
            let number = |key: &str| entry.get(key).and_then(Value::as_u64).filter(|n| *n > 0);
            let loaded = entry.get("state").and_then(Value::as_str) == Some("loaded");
            let window = match (
                number("loaded_context_length"),
                number("max_context_length"),
            ) {
                (Some(n), _) => Window::new(n, "LM Studio /api/v0/models loaded_context_length"),
                (None, Some(n)) => Window::new(n, "LM Studio /api/v0/models max_context_length"),
                (None, None) => None,
            };
            Some(LmStudioModel {
                id: id(entry)?.to_owned(),
                kind: entry
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("llm")
                    .to_owned(),
                loaded,
                window,
            })
        })
        .collect()
}

/// The model LM Studio serves when none is named: a loaded chat model, else the first chat
/// model it has (embedding models cannot chat).
pub(super) fn lm_studio_pick(models: &[LmStudioModel]) -> Option<&LmStudioModel> {
    let chat = |m: &&LmStudioModel| m.kind != "embeddings";
    models
        .iter()
        .filter(chat)
        .find(|m| m.loaded)
        .or_else(|| models.iter().find(chat))
}

/// The names Ollama's `GET /api/tags` lists, in its order (most recently changed first).
pub(super) fn ollama_tags(body: &Value) -> Vec<String> {
    body.get("models")
        .and_then(Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m.get("name").or_else(|| m.get("model")))
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// How a request reaches an Ollama model, which decides its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OllamaRoute {
    /// Ollama's own `/api/chat`, where tern sends `num_ctx` with every request: the window
    /// is tern's choice, up to `cap` (what tern would assume) and never past the model.
    Native { cap: u64 },
    /// Ollama's `/v1` endpoints, which take no `num_ctx`: the Modelfile's, else Ollama's
    /// default (4096 on machines with less than 24 GiB of GPU memory, more on larger ones;
    /// the smallest is the safe one to assume).
    OpenAiCompatible,
}

/// Ollama's default context length on the smallest machines, which `/v1` requests get when
/// the Modelfile sets no `num_ctx`.
pub(super) const OLLAMA_DEFAULT_CONTEXT: u64 = 4096;

/// The window Ollama's `POST /api/show` implies for requests that come by `route`.
pub(super) fn ollama_window(body: &Value, route: OllamaRoute) -> Option<Window> {
    let num_ctx = body
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|text| {
            text.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u64>().ok())?
            })
        });
    if let Some(n) = num_ctx {
        return Window::new(n, "Ollama /api/show: the model's num_ctx");
    }
    let info = body.get("model_info");
    let trained = info
        .and_then(|info| info.get("general.architecture"))
        .and_then(Value::as_str)
        .and_then(|arch| info?.get(format!("{arch}.context_length")))
        .and_then(Value::as_u64);
    match (route, trained) {
        (OllamaRoute::Native { cap }, Some(n)) if n <= cap => {
            Window::new(n, "Ollama /api/show: the model's context_length")
        }
        (OllamaRoute::Native { cap }, Some(n)) => Window::new(
            cap,
            format!("Ollama /api/show: the model takes {n}; tern asks for {cap}"),
        ),
        (OllamaRoute::Native { .. }, None) => None,
        (OllamaRoute::OpenAiCompatible, trained) => {
            let tokens = trained.map_or(OLLAMA_DEFAULT_CONTEXT, |n| n.min(OLLAMA_DEFAULT_CONTEXT));
            Window::new(
                tokens,
                "Ollama /api/show: no num_ctx set, so Ollama's default (set num_ctx in a \
                 Modelfile or OLLAMA_CONTEXT_LENGTH for more, and context_window here)",
            )
        }
    }
}

#[cfg(test)]
#[path = "answers_tests.rs"]
mod tests;
