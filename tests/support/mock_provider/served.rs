//! What the mock says about the model it serves, as one of the servers tern asks: llama.cpp's
//! server, vLLM, Ollama or LM Studio, each answering its own endpoints in the shape its
//! documentation shows (ids, owners and the fields around the window included, so a reader
//! that keys on the wrong field fails here as it would against the real server).
//!
//! [`Identity::Plain`] is what the mock always was: a bare model list and 404 elsewhere.

use serde_json::{Value, json};

/// Which server the mock answers model questions as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Identity {
    /// A model list with names only, no window anywhere; `/props`, `/api/show` and
    /// `/api/v0/models` are not found.
    #[default]
    Plain,
    /// llama.cpp's server started with `-c n_ctx` on a model trained for 32768.
    LlamaCpp { model: String, n_ctx: u64 },
    /// vLLM serving one model with `--max-model-len`.
    Vllm { model: String, max_model_len: u64 },
    /// Ollama with one model; `num_ctx` is the Modelfile's, if it sets one.
    Ollama {
        model: String,
        context_length: u64,
        num_ctx: Option<u64>,
    },
    /// LM Studio with an embedding model and `loaded`, loaded with `loaded_context_length`.
    LmStudio {
        loaded: String,
        loaded_context_length: u64,
    },
}

/// The training context the llama.cpp identity's model reports (never the window).
const TRAINED: u64 = 32_768;
const CREATED: u64 = 1_735_689_600;

/// A model question the mock can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Question {
    /// `GET /v1/models` or `/models`.
    ModelList,
    /// `GET /api/tags`.
    OllamaTags,
    /// llama.cpp's `GET /props`.
    Props,
    /// Ollama's `POST /api/show`.
    OllamaShow,
    /// LM Studio's `GET /api/v0/models`.
    LmStudioModels,
}

impl Question {
    pub(super) fn of(method: &str, path: &str) -> Option<Self> {
        match (method, path) {
            ("GET", "/v1/models" | "/models") => Some(Self::ModelList),
            ("GET", "/api/tags") => Some(Self::OllamaTags),
            ("GET", "/props") => Some(Self::Props),
            ("POST", "/api/show") => Some(Self::OllamaShow),
            ("GET", "/api/v0/models") => Some(Self::LmStudioModels),
            _ => None,
        }
    }
}

impl Identity {
    /// The answer to `question`, or `None` for "not found". `plain_names` is what the plain
    /// identity lists (the models the script knows); `asked` is the body's `model`, if any.
    pub(super) fn answer(
        &self,
        question: Question,
        plain_names: &[String],
        asked: Option<&str>,
    ) -> Option<Value> {
        match (self, question) {
            (Self::Plain, Question::ModelList) => Some(super::wire::model_list(plain_names)),
            (Self::Plain, Question::OllamaTags) => Some(super::wire::ollama_tags(plain_names)),
            (Self::Plain, _) => None,

            (Self::LlamaCpp { model, .. }, Question::ModelList) => Some(json!({
                "object": "list",
                "data": [{
                    "id": model,
                    "object": "model",
                    "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
                    "created": CREATED,
                    "owned_by": "llamacpp",
                    "meta": {"vocab_type": 2, "n_vocab": 151_936, "n_ctx_train": TRAINED,
                             "n_embd": 896, "n_params": 494_032_768_u64, "size": 531_065_856_u64}
                }]
            })),
            (Self::LlamaCpp { model, n_ctx }, Question::Props) => Some(json!({
                "default_generation_settings": {
                    "id": 0, "id_task": -1, "n_ctx": n_ctx, "speculative": false,
                    "is_processing": false,
                    "params": {"n_predict": -1, "seed": 4_294_967_295_u64, "temperature": 0.8,
                               "top_k": 40, "top_p": 0.95, "min_p": 0.05, "max_tokens": -1,
                               "samplers": ["dry", "top_k", "typ_p", "top_p", "min_p", "xtc",
                                            "temperature"]},
                    "prompt": "",
                    "next_token": {"has_next_token": true, "has_new_line": false,
                                   "n_remain": -1, "n_decoded": 0}
                },
                "total_slots": 1,
                "model_path": model,
                "chat_template": "{{ messages }}",
                "chat_template_caps": {},
                "modalities": {"vision": false},
                "build_info": "b5000-0000000",
                "is_sleeping": false
            })),
            (Self::LlamaCpp { .. }, _) => None,

            (
                Self::Vllm {
                    model,
                    max_model_len,
                },
                Question::ModelList,
            ) => Some(json!({
                "object": "list",
                "data": [{
                    "id": model, "object": "model", "created": CREATED, "owned_by": "vllm",
                    "root": model, "parent": null, "max_model_len": max_model_len,
                    "permission": [{
                        "id": "modelperm-mock", "object": "model_permission", "created": CREATED,
                        "allow_create_engine": false, "allow_sampling": true,
                        "allow_logprobs": true, "allow_search_indices": false,
                        "allow_view": true, "allow_fine_tuning": false, "organization": "*",
                        "group": null, "is_blocking": false
                    }]
                }]
            })),
            (Self::Vllm { .. }, _) => None,

            (Self::Ollama { model, .. }, Question::ModelList) => Some(json!({
                "object": "list",
                "data": [{"id": model, "object": "model", "created": CREATED,
                          "owned_by": "library"}]
            })),
            (Self::Ollama { model, .. }, Question::OllamaTags) => {
                Some(super::wire::ollama_tags(std::slice::from_ref(model)))
            }
            (
                Self::Ollama {
                    model,
                    context_length,
                    num_ctx,
                },
                Question::OllamaShow,
            ) if asked == Some(model.as_str()) => {
                let mut parameters = String::new();
                if let Some(n) = num_ctx {
                    parameters.push_str(&format!("num_ctx                        {n}\n"));
                }
                parameters.push_str("stop                           \"<|im_end|>\"");
                Some(json!({
                    "modelfile": format!("FROM {model}\n"),
                    "parameters": parameters,
                    "template": "{{ .Prompt }}",
                    "details": {"parent_model": "", "format": "gguf", "family": "qwen2",
                                "families": ["qwen2"], "parameter_size": "494.03M",
                                "quantization_level": "Q4_K_M"},
                    "model_info": {"general.architecture": "qwen2",
                                   "general.parameter_count": 494_032_768_u64,
                                   "qwen2.context_length": context_length,
                                   "qwen2.embedding_length": 896},
                    "capabilities": ["completion", "tools"],
                    "modified_at": "2025-01-01T00:00:00Z"
                }))
            }
            (Self::Ollama { .. }, _) => None,

            (Self::LmStudio { loaded, .. }, Question::ModelList) => Some(json!({
                "object": "list",
                "data": [
                    {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model",
                     "owned_by": "organization_owner"},
                    {"id": loaded, "object": "model", "owned_by": "organization_owner"}
                ]
            })),
            (
                Self::LmStudio {
                    loaded,
                    loaded_context_length,
                },
                Question::LmStudioModels,
            ) => Some(json!({
                "object": "list",
                "data": [
                    {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model",
                     "type": "embeddings", "publisher": "nomic-ai", "arch": "nomic-bert",
                     "compatibility_type": "gguf", "quantization": "Q4_0",
                     "state": "not-loaded", "max_context_length": 2048},
                    {"id": loaded, "object": "model", "type": "llm",
                     "publisher": "lmstudio-community", "arch": "qwen2",
                     "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded",
                     "max_context_length": 131_072,
                     "loaded_context_length": loaded_context_length}
                ]
            })),
            (Self::LmStudio { .. }, _) => None,
        }
    }
}
