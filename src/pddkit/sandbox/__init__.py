"""Ground-truth sandbox: small causal LMs trained on texts we choose, so membership is known."""
