"""What a method reads of an image: backbones, their weights, the feature and token banks, the frozen
prefix and the trainable tails' inputs, augmented views.

- `backbones` (the registered backbones) and `weights` (their files, where they are published, checks),
  `weight_sources` (the files' URLs and checksums, and `bench weights fetch`);
- `views`: the encoder (test transform + backbone), features and their augmented views (`FeatureViews`,
  `LiveViews`), extraction; `precision`: the autocast each forward runs under;
- `bank`: the feature bank (fp16 features of a fixed set of views, shared by every seed and method), and
  `bank_space`: whether the banks a grid would build fit their cache;
- `tokens` (the prefix/tail split of a ViT and the live token source) and `token_bank` (stored tokens);
- `augment`: every dataset's training-view policies (the toy datasets' shifts, the real datasets' crops and
  colour operations), by name.

Imports from: bench.errors, bench.core, bench.splits, bench.registries, bench.data, bench.config.
"""
