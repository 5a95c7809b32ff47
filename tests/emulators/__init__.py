"""Loopback emulators of the cloud APIs the inventory plugins call.

aws.py wraps moto's server; tencent.py and huawei.py are small HTTP servers
that answer each official SDK with the documented response shapes. The
Alibaba Cloud emulator and the server they are all built on live in the
gpufleet package (gpufleet/lab/_cloud), because `gpufleet lab up` runs the
former from an installed CLI too. All bind 127.0.0.1 and support seeding,
paging, injected throttling, a failed region and latency (see
gpufleet/lab/_cloud/_server.py).
"""
