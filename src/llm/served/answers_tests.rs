//! The answers of each server, in the shapes their documentation shows, read back.

use super::*;
use serde_json::json;

fn window(tokens: u64, said_by: &str) -> Option<Window> {
    Some(Window {
        tokens,
        said_by: said_by.to_owned(),
    })
}

/// llama.cpp's `GET /props`, as its server README shows it (the settings shortened).
const LLAMA_CPP_PROPS: &str = r#"{
  "default_generation_settings": {
    "id": 0, "id_task": -1, "n_ctx": 4096, "speculative": false, "is_processing": false,
    "params": {"n_predict": -1, "seed": 4294967295, "temperature": 0.8, "top_k": 40,
               "samplers": ["dry", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]},
    "prompt": "",
    "next_token": {"has_next_token": true, "has_new_line": false, "n_remain": -1, "n_decoded": 0}
  },
  "total_slots": 1,
  "model_path": "../models/qwen2.5-coder-0.5b-instruct-q8_0.gguf",
  "chat_template": "...",
  "chat_template_caps": {},
  "modalities": {"vision": false},
  "build_info": "b5000-abcdef0",
  "is_sleeping": false
}"#;

/// llama.cpp's `GET /v1/models`: one entry whose `meta` has the training context only.
const LLAMA_CPP_MODELS: &str = r#"{
  "object": "list",
  "data": [{
    "id": "../models/qwen2.5-coder-0.5b-instruct-q8_0.gguf",
    "object": "model",
    "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
    "created": 1735142223,
    "owned_by": "llamacpp",
    "meta": {"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 32768, "n_embd": 896,
             "n_params": 494032768, "size": 531065856}
  }]
}"#;

/// vLLM's `GET /v1/models`.
const VLLM_MODELS: &str = r#"{
  "object": "list",
  "data": [{
    "id": "Qwen/Qwen2.5-Coder-7B-Instruct", "object": "model", "created": 1735142223,
    "owned_by": "vllm", "root": "Qwen/Qwen2.5-Coder-7B-Instruct", "parent": null,
    "max_model_len": 16384,
    "permission": [{"id": "modelperm-1", "object": "model_permission", "created": 1735142223,
                    "allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true,
                    "allow_search_indices": false, "allow_view": true,
                    "allow_fine_tuning": false, "organization": "*", "group": null,
                    "is_blocking": false}]
  }]
}"#;

/// LM Studio's `GET /api/v0/models`: a model not loaded, a loaded one, an embedding model.
const LM_STUDIO_MODELS: &str = r#"{
  "object": "list",
  "data": [
    {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model", "type": "embeddings",
     "publisher": "nomic-ai", "arch": "nomic-bert", "compatibility_type": "gguf",
     "quantization": "Q4_0", "state": "not-loaded", "max_context_length": 2048},
    {"id": "qwen2-vl-7b-instruct", "object": "model", "type": "vlm", "publisher": "mlx-community",
     "arch": "qwen2_vl", "compatibility_type": "mlx", "quantization": "4bit",
     "state": "not-loaded", "max_context_length": 32768},
    {"id": "meta-llama-3.1-8b-instruct", "object": "model", "type": "llm",
     "publisher": "lmstudio-community", "arch": "llama", "compatibility_type": "gguf",
     "quantization": "Q4_K_M", "state": "loaded", "max_context_length": 131072,
     "loaded_context_length": 8192}
  ]
}"#;

/// Ollama's `POST /api/show` for a model whose Modelfile sets `num_ctx`.
const OLLAMA_SHOW_NUM_CTX: &str = r#"{
  "modelfile": "FROM qwen2.5-coder:0.5b\nPARAMETER num_ctx 8192\n",
  "parameters": "num_ctx                        8192\nstop                           \"<|im_end|>\"",
  "template": "{{ .Prompt }}",
  "details": {"parent_model": "", "format": "gguf", "family": "qwen2", "families": ["qwen2"],
              "parameter_size": "494.03M", "quantization_level": "Q4_K_M"},
  "model_info": {"general.architecture": "qwen2", "general.parameter_count": 494032768,
                 "qwen2.context_length": 32768, "qwen2.embedding_length": 896},
  "capabilities": ["completion", "tools"],
  "modified_at": "2025-05-01T10:00:00.000000000+02:00"
}"#;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("a recorded answer is JSON")
}

#[test]
fn llama_cpp_says_its_window_in_props_not_in_the_training_context() {
    assert_eq!(
        props_window(&parse(LLAMA_CPP_PROPS)),
        window(4096, "llama.cpp /props")
    );
    assert_eq!(
        props_window(&json!({"n_ctx": 2048})),
        window(2048, "llama.cpp /props")
    );
    let models = parse(LLAMA_CPP_MODELS);
    let entries = model_entries(&models);
    let entry = entry_for(&entries, "../models/qwen2.5-coder-0.5b-instruct-q8_0.gguf").unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entry_window(entry), None, "n_ctx_train is not the window");
    let with_n_ctx = json!({"id": "m", "meta": {"n_ctx": 4096, "n_ctx_train": 32768}});
    assert_eq!(
        entry_window(&with_n_ctx),
        window(4096, "llama.cpp /v1/models meta.n_ctx")
    );
}

#[test]
fn vllm_says_max_model_len_for_the_model_asked_for() {
    let models = parse(VLLM_MODELS);
    let entries = model_entries(&models);
    assert!(entry_for(&entries, "other").is_none());
    let entry = entry_for(&entries, "Qwen/Qwen2.5-Coder-7B-Instruct").unwrap();
    assert_eq!(
        entry_window(entry),
        window(16384, "vLLM /v1/models max_model_len")
    );
}

#[test]
fn lm_studio_says_the_loaded_window_and_serves_the_loaded_chat_model() {
    let models = lm_studio_models(&parse(LM_STUDIO_MODELS));
    assert_eq!(models.len(), 3);
    let picked = lm_studio_pick(&models).unwrap();
    assert_eq!(picked.id, "meta-llama-3.1-8b-instruct");
    assert_eq!(
        picked.window,
        window(8192, "LM Studio /api/v0/models loaded_context_length")
    );
    // Nothing loaded: the first chat model, with the most it takes; never an embedding model.
    let unloaded: Vec<LmStudioModel> = models[..2].to_vec();
    let picked = lm_studio_pick(&unloaded).unwrap();
    assert_eq!(picked.id, "qwen2-vl-7b-instruct");
    assert_eq!(
        picked.window,
        window(32768, "LM Studio /api/v0/models max_context_length")
    );
}

#[test]
fn ollama_num_ctx_wins_and_otherwise_the_route_decides() {
    let native = OllamaRoute::Native { cap: 16384 };
    let show = parse(OLLAMA_SHOW_NUM_CTX);
    assert_eq!(
        ollama_window(&show, native),
        window(8192, "Ollama /api/show: the model's num_ctx")
    );
    assert_eq!(
        ollama_window(&show, OllamaRoute::OpenAiCompatible).map(|w| w.tokens),
        Some(8192)
    );
    let mut bare = show.clone();
    bare["parameters"] = json!("stop \"<|im_end|>\"");
    // tern sends num_ctx itself on the native API: up to what it would assume.
    assert_eq!(
        ollama_window(&bare, native),
        window(
            16384,
            "Ollama /api/show: the model takes 32768; tern asks for 16384"
        )
    );
    assert_eq!(
        ollama_window(&bare, OllamaRoute::Native { cap: 65536 }).map(|w| w.tokens),
        Some(32768)
    );
    // `/v1` cannot send num_ctx: Ollama's default applies, never more than the model takes.
    assert_eq!(
        ollama_window(&bare, OllamaRoute::OpenAiCompatible).map(|w| w.tokens),
        Some(OLLAMA_DEFAULT_CONTEXT)
    );
    bare["model_info"]["qwen2.context_length"] = json!(2048);
    assert_eq!(
        ollama_window(&bare, OllamaRoute::OpenAiCompatible).map(|w| w.tokens),
        Some(2048)
    );
    assert_eq!(
        ollama_tags(&json!({"models": [{"name": "qwen2.5-coder:0.5b"}, {"name": "llama3.2"}]})),
        ["qwen2.5-coder:0.5b", "llama3.2"]
    );
}

#[test]
fn a_gateway_lists_context_length_and_nonsense_says_nothing() {
    let entry = json!({"id": "openai/gpt-4.1", "context_length": 1047576,
                       "top_provider": {"context_length": 1047576}});
    assert_eq!(
        entry_window(&entry),
        window(1_047_576, "/v1/models context_length")
    );
    for nothing in [
        json!({}),
        json!({"data": "x"}),
        json!({"data": [{"no": "id"}]}),
        json!([1, 2]),
    ] {
        assert!(model_entries(&nothing).is_empty(), "{nothing}");
        assert_eq!(props_window(&nothing), None);
    }
    assert_eq!(entry_window(&json!({"id": "m", "max_model_len": 0})), None);
    assert_eq!(
        props_window(&json!({"default_generation_settings": {"n_ctx": "4096"}})),
        None
    );
}
