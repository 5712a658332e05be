"""Security checks of what a model file carries besides its tensors: ``chat_templates`` scans every
``tokenizer.chat_template*`` value for sandbox escapes (``validate --security``; needs the ``security`` extra).

Imports: the library (``api.registry`` and below); never ``testing`` or ``cli``.
"""
