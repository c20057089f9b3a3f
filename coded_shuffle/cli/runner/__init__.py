"""The MPI experiment runner behind ``coded-shuffle run``: the job's typed options
(:mod:`.options`), the job with a master (:mod:`.mpi_job`) and among peers (:mod:`.peers_job`),
and the probe of the links (:mod:`.probe`). Each rank is a client of the engine's session
(:class:`~coded_shuffle.engine.session.Session`); the MPI program (:mod:`coded_shuffle.mpi_program`)
parses the command line and calls it.
"""
