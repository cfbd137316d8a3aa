"""(model, texts) -> per-token statistics, once; plus model loading and frequency tables."""
