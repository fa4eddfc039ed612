"""Getting catchup running: the recipes ``catchup deploy`` prints (a Kubernetes
CronJob or Deployment, systemd units) and ``catchup demo``."""
