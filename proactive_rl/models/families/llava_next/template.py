"""The chat template of LLaVA-NeXT-Mistral, as its released processor ships it (the ``chat_template.json`` of
llava-hf/llava-v1.6-mistral-7b-hf).

The tiny model carries the same template as the real checkpoints, so that every rendering path (`proactive_rl.chat`)
is exercised exactly as it will be with LLaVA-NeXT-Mistral.
"""

# llava-hf/llava-v1.6-mistral-7b-hf (LLaVA-NeXT-Mistral-7B, ProactiveBench §5): Mistral's ``[INST] ... [/INST]``,
# images first in a user turn. There is no generation-prompt branch: the answer follows `` [/INST]`` directly.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<<SYS>>\\n' + message['content'][0]['text'] + '\\n<</SYS>>\\n\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '[INST] ' }}{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\\n' }}{% endfor %}"
    "{# Render all text next #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] }}{% endfor %}"
    "{{' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'][0]['text'] + '</s> '}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
