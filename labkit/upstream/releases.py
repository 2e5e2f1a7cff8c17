"""Releases the kit's tests audit by name: a small set of the release matrix, chosen for what each shows.

The matrix itself (:mod:`labkit.upstream.record`) takes every release from the index, so no list of
all releases is kept here. These are the releases the unit tests fetch at test time (a few hundred kB
each), each for a part of the verdict; which verdict each gets is not written here: the tests derive
it by running the kit's own buggy and fixed kernels in the same scenario, and by reading the files.

* ``NO_SLOT_STORE``: its ``gumbel_sample`` takes no slot-indexed output (not applicable).
* ``UNMASKED``: the newest release whose kernel stores q by slot without a mask and whose DFlash pads
  with 0: its speculator has no host fill either (affected, every part of the fix missing).
* ``FIRST_FIXED``: the first release with all three parts of the fix.
* ``CACHE_API``: a kernel whose q is a logits cache and whose signature has no ``is_drafting``.
* ``IMPORTS_HELPER``: a kernel file that imports a helper from another file of Model Runner V2.
"""

from __future__ import annotations

NO_SLOT_STORE = "0.17.0"
UNMASKED = "0.24.0"
FIRST_FIXED = "0.25.0"
CACHE_API = "0.28.0"
IMPORTS_HELPER = "0.34.0"
RELEASES = (NO_SLOT_STORE, UNMASKED, FIRST_FIXED, CACHE_API, IMPORTS_HELPER)
