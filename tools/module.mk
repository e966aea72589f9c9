TOOLS += gice-bench
TOOLS += gice-info
TOOLS += gice-demo
TOOLS += gicerun
