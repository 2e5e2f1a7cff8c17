"""Proofs that the fix is right: the padding-invariance audit, who owns each q, the distribution test, sibling bugs."""
