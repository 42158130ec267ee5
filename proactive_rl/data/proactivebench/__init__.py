"""ProactiveBench as the paper ran it, on the training side: the MS-COCO records and the QuickDraw + MS-COCO GRPO
training set (ProactiveBench §5, App. A.7, App. C; docs/spec.md §6). See docs/proactivebench.md."""
