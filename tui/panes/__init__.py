"""The four panes of the app (Cluster, Job, Planner, Alerts), each a view over the session's store and the
planner's typed views; ``cluster_rows`` builds the Cluster table's rows."""
