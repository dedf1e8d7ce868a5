"""Drivers that compose scheduled kernels: ``sketch`` (seekable sketching operators, distributed
sketching), ``randnla`` (least squares, low-rank factorizations, CholeskyQR), ``pencil`` (randomized
inverse-free pencil eigensolver), ``casgd``."""
