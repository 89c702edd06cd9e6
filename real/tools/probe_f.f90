! cosched-probe-f: the wrapped Fortran calls once each (mpif.h bindings), for the shim's tests.
program probe_f
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, size, peer, x, y, req(2)
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 2)
  double precision :: d, e
  integer, allocatable :: all(:), all2(:)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  allocate(all(size), all2(size))
  peer = ieor(rank, 1)
  x = rank
  if (peer < size) then
    if (mod(rank, 2) == 0) then
      call MPI_SEND(x, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, ierr)
      call MPI_RECV(y, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, status, ierr)
    else
      call MPI_RECV(y, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, status, ierr)
      call MPI_SEND(x, 1, MPI_INTEGER, peer, 1, MPI_COMM_WORLD, ierr)
    end if
    if (y /= peer) stop 3
    call MPI_IRECV(y, 1, MPI_INTEGER, peer, 2, MPI_COMM_WORLD, req(1), ierr)
    call MPI_ISEND(x, 1, MPI_INTEGER, peer, 2, MPI_COMM_WORLD, req(2), ierr)
    call MPI_WAITALL(2, req, statuses, ierr)
    call MPI_IRECV(y, 1, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, req(1), ierr)
    call MPI_ISEND(x, 1, MPI_INTEGER, peer, 3, MPI_COMM_WORLD, req(2), ierr)
    call MPI_WAIT(req(1), MPI_STATUS_IGNORE, ierr)
    call MPI_WAIT(req(2), status, ierr)
    call MPI_SENDRECV(x, 1, MPI_INTEGER, peer, 4, y, 1, MPI_INTEGER, peer, 4, MPI_COMM_WORLD, status, ierr)
  end if
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_BCAST(x, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  d = 1.0d0
  call MPI_REDUCE(d, e, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  call MPI_ALLREDUCE(d, e, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (e /= dble(size)) stop 4
  e = 1.0d0
  call MPI_ALLREDUCE(MPI_IN_PLACE, e, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (e /= dble(size)) stop 5
  call MPI_ALLTOALL(all, 1, MPI_INTEGER, all2, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_ALLGATHER(x, 1, MPI_INTEGER, all, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_FINALIZE(ierr)
end program probe_f
