"""Loopback emulators of the cloud APIs the inventory plugins call.

aws.py wraps moto's server; aliyun.py, tencent.py and huawei.py are small
HTTP servers that answer each official SDK with the documented response
shapes. All bind 127.0.0.1 and support seeding, paging, injected
throttling, a failed region and latency (see _server.py).
"""
