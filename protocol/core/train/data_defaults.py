"""The corpus's default page layout, without torch: the CLI's option defaults read it at start."""

DEFAULT_PAGE_TOKENS = 4096  # tokens per page (a page must be longer than one block)
DEFAULT_HELDOUT_EVERY = 20  # 1 page in 20 (5%) is held out
