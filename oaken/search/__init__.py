"""Search: the query parser, the two retrievers, fusion and the engine that runs them."""
