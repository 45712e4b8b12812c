"""Imported only by the local pool's fork server (bench.execution.workers sets it as the fork server's preload),
never by bench itself: the fork server dies with the bench process that started it, and with it, by
their own parent-death signal, every worker it forked."""
from bench.execution.lifeline import die_with_parent

die_with_parent()
