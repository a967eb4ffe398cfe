"""What every task's scorer shares (status counts); the scorers are in their task's folder
(``novabench.tasks.<name>.metrics``)."""
