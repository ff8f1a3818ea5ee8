"""model_types whose transformers config keeps the language model's fields under ``text_config``.

A draft config.json with one of these model_types is built by transformers as the composite
(vision-language, audio, ...) config, which has no top-level ``vocab_size``, ``hidden_size`` or
layers, so vLLM's draft classes fail reading them ("'Qwen2_5_VLConfig' object has no attribute
'vocab_size'"). Generated from transformers 5.19.0: every ``CONFIG_MAPPING`` class with a
``text_config`` sub-config whose default instance has no ``vocab_size``.
tests/engine_tier/test_composite_types.py regenerates it from the installed transformers.
"""

TRANSFORMERS_VERSION = "5.19.0"
COMPOSITE_MODEL_TYPES = frozenset({
    'aimv2', 'align', 'altclip', 'aria', 'audioflamingo3', 'aya_vision', 'blip', 'blip-2',
    'bridgetower', 'chinese_clip', 'clap', 'clip', 'clipseg', 'clvp', 'cohere2_vision',
    'cohere_compass', 'colpali', 'cosmos3_edge', 'cosmos3_omni', 'deepseek_ocr2', 'deepseek_vl',
    'deepseek_vl_hybrid', 'diffusion_gemma', 'embedding_gemma2', 'emu3', 'ernie4_5_vl_moe',
    'exaone4_5', 'fast_vlm', 'flava', 'florence2', 'fun_asr_nano', 'gemma3', 'gemma3n', 'gemma4',
    'gemma4_assistant', 'gemma4_unified', 'gemma4_unified_assistant', 'glm46v', 'glm4v',
    'glm4v_moe', 'glm5_next', 'glm_image', 'glm_ocr', 'glmasr', 'glmga', 'got_ocr2',
    'granite4_vision', 'granite_speech', 'granite_speech_plus', 'grounding-dino', 'groupvit',
    'hunyuan_vl', 'hyperclovax_vision_v2', 'idefics2', 'idefics3', 'inkling_mm_model',
    'instructblip', 'instructblipvideo', 'internvl', 'janus', 'kimi_k25', 'kosmos-2', 'kosmos-2.5',
    'lfm2_vl', 'lighton_ocr', 'llama4', 'llava', 'llava_next', 'llava_next_video',
    'llava_onevision', 'metaclip_2', 'minicpmv4_6', 'minicpmv4_7', 'minimax_m3_vl', 'mistral3',
    'mllama', 'mm-grounding-dino', 'modernvbert', 'muse_glimmer', 'musicflamingo',
    'nemotron_h_omni', 'omdet-turbo', 'owlv2', 'owlvit', 'paddleocr_vl', 'pe_audio',
    'perception_lm', 'pix2struct', 'pp_chart2table', 'pp_formulanet', 'qianfan_ocr',
    'qwen2_5_omni_thinker', 'qwen2_5_vl', 'qwen2_audio', 'qwen2_vl', 'qwen3_5', 'qwen3_5_moe',
    'qwen3_asr', 'qwen3_omni_moe_thinker', 'qwen3_vl', 'qwen3_vl_moe', 'qwen4_exp', 'sam3',
    'sam3_lite_text', 'shieldgemma2', 'siglip', 'siglip2', 'smolvlm', 'step3p7', 't5gemma2_encoder',
    'tipsv2', 'vibevoice_asr', 'video_llama_3', 'video_llava', 'videoprism', 'vipllava', 'voxtral',
    'voxtral_realtime', 'xclip'
})

