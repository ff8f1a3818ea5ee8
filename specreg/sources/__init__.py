"""Where a draft's config comes from: the Hugging Face Hub and its cache, and the native layouts other trainers write."""
